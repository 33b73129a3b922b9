package graders

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// A grader's error names the line of the file the author wrote: the
// TypeScript source (not the JavaScript it was transpiled to), the .js file
// and the line of an inline YAML script.
func TestJSErrorLines(t *testing.T) {
	dir := t.TempDir()
	files := map[string]struct {
		src  string
		want string // file:line the error must name
	}{
		"throw.ts": {`import type { Grader } from '@plaited/acp-harness/schemas'
interface Verdict { pass: boolean; score: number }
const limit: number = 3
export const grade: Grader = async ({ output }): Promise<Verdict> => {
  throw new Error('boom at five')
}
`, "throw.ts:5"},
		"eight.ts": {`type Input = { output: string }
type R = { pass: boolean }
function helper(s: string): R {
  return { pass: s.length > 0 }
}
export function grade(i: Input): R {
  const x: any = undefined
  return x.nope.deeper
}
`, "eight.ts:8"},
		"plain.js": {`function grade(input) {
  var a = 1;
  throw new Error("plain at three");
}
`, "plain.js:3"},
		"inline.yaml": {`type: script
script: |
  function grade(input) {
    var a = 1;
    throw new Error("inline at five");
  }
`, "inline.yaml:5"},
		"body.yaml": {`type: script
script: |
  var a = input.output;
  if (a) throw new Error("body at four");
  return 1;
`, "body.yaml:4"},
		"nested.json": {`{"graders": [
  {"type": "script", "script": "function grade() { return 1 }"},
  {"type": "script", "script": "function grade() { throw new Error('json at three') }"}
]}
`, "nested.json:3"},
	}
	for name, f := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(f.src), 0o644); err != nil {
			t.Fatal(err)
		}
		res := grade(t, load(t, p, Options{}), record("x", ""))
		if res.Error == nil {
			t.Errorf("%s: no error: %+v", name, res)
			continue
		}
		re := regexp.MustCompile(regexp.QuoteMeta(f.want) + `(:\d+)?\b`)
		if !re.MatchString(res.Error.Message) {
			t.Errorf("%s: error does not name %s:\n%s", name, f.want, res.Error.Message)
		}
		if bad := regexp.MustCompile(regexp.QuoteMeta(name)+`:(\d+)`).FindAllStringSubmatch(res.Error.Message, -1); len(bad) > 0 {
			for _, m := range bad {
				if name+":"+m[1] != f.want {
					t.Errorf("%s: error names %s:%s as well:\n%s", name, name, m[1], res.Error.Message)
				}
			}
		}
	}
}
