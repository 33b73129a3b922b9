package graders

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"harness/schemas"
)

// writeConfig writes a grader config into a temp dir and returns its path.
func writeConfig(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Seed 002's JavaScript graders, verbatim, as script configs.
func TestSeed002ScriptGraders(t *testing.T) {
	long := strings.Repeat("a", 120)
	cases := []struct {
		file   string
		output string
		score  float64
	}{
		{"json-validity.yaml", `{"ok": true}`, 1},
		{"json-validity.yaml", `not json`, 0},
		{"length-check.yaml", "short", 0.3},
		{"length-check.yaml", long, 1},
		{"length-check.yaml", strings.Repeat("a", 700), 0.7},
		{"length-check.yaml", strings.Repeat("a", 1200), 0.4},
		{"required-keywords.json", "In Conclusion, all good.", 0.5},
		{"required-keywords.json", "Conclusion and Recommendation", 1},
		{"tool-call-validation.yaml", "x", 1},
	}
	for _, c := range cases {
		g := load(t, fx("seed002/"+c.file), Options{})
		r := grade(t, g, record(c.output, ""))
		wantOK(t, r, c.score >= 0.5, c.score)
		if !strings.HasPrefix(r.Grader, "js:") {
			t.Errorf("grader name %q", r.Grader)
		}
	}
	// No tool calls: the tool-call validator returns 0.
	rec := record("x", "")
	rec.Trajectory = rec.Trajectory[2:]
	wantOK(t, grade(t, load(t, fx("seed002/tool-call-validation.yaml"), Options{}), rec), false, 0)
}

// The RFT input: messages, response, toolCalls in OpenAI shape, metadata.
func TestJSInputShape(t *testing.T) {
	p := writeConfig(t, "g.json", `{"type":"script","script":"function grade(input) { return {pass: true, score: 1, reasoning: JSON.stringify({m: input.messages, t: input.toolCalls, r: input.response, md: input.metadata, id: input.id, out: input.output})}; }"}`)
	r := grade(t, load(t, p, Options{}), record("The answer is 42.", ""))
	wantOK(t, r, true, 1)
	var got struct {
		M, T json.RawMessage
		R    string
		MD   map[string]any
		ID   string
		Out  string
	}
	if err := json.Unmarshal([]byte(r.Reasoning), &got); err != nil {
		t.Fatal(err)
	}
	if string(got.T) != `[{"function":{"arguments":"{\"path\":\"a.go\"}","name":"Read"},"id":"call_1","type":"function"}]` {
		t.Errorf("toolCalls %s", got.T)
	}
	wantMsgs := `[{"content":"What is 15 + 27?","role":"user"},{"content":"","role":"assistant","tool_calls":[{"function":{"arguments":"{\"path\":\"a.go\"}","name":"Read"},"id":"call_1","type":"function"}]},{"content":"package a","role":"tool","tool_call_id":"call_1"},{"content":"The answer is 42.","role":"assistant"}]`
	if string(got.M) != wantMsgs {
		t.Errorf("messages %s\nwant     %s", got.M, wantMsgs)
	}
	if got.R != "The answer is 42." || got.Out != got.R || got.MD["category"] != "math" || got.ID != "case-1" {
		t.Errorf("got %+v", got)
	}
}

func TestJSResults(t *testing.T) {
	cases := []struct {
		script, class, msg string
		pass               bool
		score              float64
	}{
		{script: "function grade(input) { return {pass: false, score: 0.4, reason: 'meh', checks: [{text: 'a', pass: false}]}; }", score: 0.4},
		{script: "return input.response.length > 3 ? 1 : 0;", pass: true, score: 1}, // a function body
		{script: "async function grade(input) { const x = await Promise.resolve(0.75); return x; }", pass: true, score: 0.75},
		{script: "function grade(input) { return true; }", pass: true, score: 1},
		{script: "function grade(input) { throw new Error('kaput'); }", class: schemas.ErrGraderError, msg: "kaput"},
		{script: "async function grade(input) { throw new Error('async kaput'); }", class: schemas.ErrGraderError, msg: "async kaput"},
		{script: "function grade(input) { return 2; }", class: schemas.ErrGraderInvalid, msg: "outside 0..1"},
		{script: "function grade(input) { return undefined; }", class: schemas.ErrGraderInvalid, msg: "returned undefined"},
		{script: "function grade(input) { return {reasoning: 'x'}; }", class: schemas.ErrGraderInvalid, msg: "neither pass nor score"},
		{script: "function grade(input) { return new Promise(function(){}); }", class: schemas.ErrGraderError, msg: "never settled"},
		// Scores that are not numbers never count as a verdict.
		{script: "function grade(input) { return {pass: true, score: NaN}; }", class: schemas.ErrGraderInvalid, msg: "score NaN"},
		{script: "function grade(input) { return {score: NaN}; }", class: schemas.ErrGraderInvalid, msg: "score NaN"},
		{script: "function grade(input) { return {pass: true, score: Infinity}; }", class: schemas.ErrGraderInvalid, msg: "score +Inf"},
		{script: "function grade(input) { return {pass: true, score: -Infinity}; }", class: schemas.ErrGraderInvalid, msg: "score -Inf"},
		{script: "function grade(input) { return {pass: true, score: '1'}; }", class: schemas.ErrGraderInvalid, msg: "score 1"},
		{script: "function grade(input) { return {pass: true, score: null}; }", class: schemas.ErrGraderInvalid, msg: "score null"},
		{script: "function grade(input) { return NaN; }", class: schemas.ErrGraderInvalid, msg: "score is NaN, not a number"},
		{script: "function grade(input) { console.log('looping'); for(;;){} }", class: schemas.ErrGraderTimeout, msg: "looping"},
	}
	for _, c := range cases {
		t.Run(c.script, func(t *testing.T) {
			p := writeConfig(t, "g.json", string(mustJSON(map[string]any{"type": "script", "script": c.script})))
			g := load(t, p, Options{Timeout: 200 * time.Millisecond})
			r := grade(t, g, record("hello", ""))
			if c.class != "" {
				wantErr(t, r, c.class, c.msg)
				return
			}
			wantOK(t, r, c.pass, c.score)
		})
	}
}

// State does not leak between grading calls: each gets a fresh runtime.
func TestJSIsolation(t *testing.T) {
	p := writeConfig(t, "g.yaml", "type: script\nscript: |\n  var n = 0;\n  function grade(input) { n++; return n === 1 ? 1 : 0; }\n")
	g := load(t, p, Options{})
	for i := 0; i < 3; i++ {
		wantOK(t, grade(t, g, record("x", "")), true, 1)
	}
}

func TestJSModules(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"default.mjs": "export default function (input) { return { pass: true, score: 0.9, reasoning: input.output }; }",
		"cjs.cjs":     "module.exports = { grade: (i) => ({ pass: i.output === 'x', score: 1 }) };",
		"rft.js":      "function grade(input) { return input.response === 'x' ? 1 : 0; }",
		"types.ts": `import type { Grader } from '@plaited/acp-harness/schemas'
interface R { pass: boolean; score: number }
const check = (s?: string): R => ({ pass: s?.includes('x') ?? false, score: s?.includes('x') ? 1 : 0 })
export const grade: Grader = async ({ output }) => check(output)`,
	}
	for name, src := range files {
		os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644)
	}
	wantOK(t, grade(t, load(t, filepath.Join(dir, "default.mjs"), Options{}), record("x", "")), true, 0.9)
	wantOK(t, grade(t, load(t, filepath.Join(dir, "cjs.cjs"), Options{}), record("x", "")), true, 1)
	wantOK(t, grade(t, load(t, filepath.Join(dir, "rft.js"), Options{}), record("x", "")), true, 1)
	wantOK(t, grade(t, load(t, filepath.Join(dir, "types.ts"), Options{}), record("x", "")), true, 1)
	wantOK(t, grade(t, load(t, filepath.Join(dir, "types.ts"), Options{}), record("y", "")), false, 0)

	bad := map[string]string{
		"nograde.js":  "export const other = 1;",
		"syntax.ts":   "export const grade = (",
		"toplevel.js": "for(;;){}",
	}
	for name, src := range bad {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(src), 0o644)
		_, err := Load(p, Options{Timeout: 200 * time.Millisecond})
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: want an error naming the file, got %v", name, err)
		}
	}
}

// A timed-out or throwing call does not poison later calls (runtimes are
// pooled), and concurrent calls are safe.
func TestJSRecoveryAndConcurrency(t *testing.T) {
	p := writeConfig(t, "g.yaml", "type: script\nscript: |\n  function grade(input) {\n    if (input.response === 'loop') for(;;){}\n    if (input.response === 'throw') throw new Error('no');\n    return input.response.length / 10;\n  }\n")
	g := load(t, p, Options{Timeout: 100 * time.Millisecond})
	wantErr(t, grade(t, g, record("loop", "")), schemas.ErrGraderTimeout, "did not finish")
	wantOK(t, grade(t, g, record("abcde", "")), true, 0.5)
	wantErr(t, grade(t, g, record("throw", "")), schemas.ErrGraderError, "no")
	wantOK(t, grade(t, g, record("abcdef", "")), true, 0.6)
	done := make(chan schemas.GraderResult)
	for i := range 8 {
		go func() { done <- grade(t, g, record(strings.Repeat("a", i+1), "")) }()
	}
	sum := 0.0
	for range 8 {
		r := <-done
		if r.Error != nil {
			t.Fatalf("concurrent call failed: %v", r.Error)
		}
		sum += r.Score
	}
	if sum < 3.6-1e-9 || sum > 3.6+1e-9 {
		t.Errorf("scores sum to %v, want 3.6", sum)
	}
}

// A TS grader that imports a module the runtime cannot load fails to load,
// before any record is graded, whether or not it uses the import; the
// message is the one the docs show, without the JavaScript exception and
// Go frames around it. Type-only imports, however written, load.
func TestJSImportLoadErrors(t *testing.T) {
	cases := []struct {
		name, src string
		want      string // "" for a grader that loads
	}{
		{"used.ts", "import Anthropic from '@anthropic-ai/sdk'\nconst client = new Anthropic()\nexport const grade = () => ({pass: true, score: 1})\n",
			`grader DIR/used.ts:1 imports "@anthropic-ai/sdk": the in-process`},
		{"unused.ts", "// a judge\n\nimport Anthropic from '@anthropic-ai/sdk'\nexport const grade = () => ({pass: true, score: 1})\n",
			`grader DIR/unused.ts:3 imports "@anthropic-ai/sdk": the in-process`},
		{"unused-named.ts", "import { readFileSync as read } from 'node:fs'\nexport const grade = () => ({pass: true, score: 1})\n",
			`grader DIR/unused-named.ts:1 imports "node:fs"`},
		{"unused-namespace.mts", "import * as path from \"node:path\"\nexport const grade = () => ({pass: true, score: 1})\n",
			`grader DIR/unused-namespace.mts:1 imports "node:path"`},
		{"used-in-grade.ts", "import { readFileSync } from 'fs'\nexport const grade = () => ({pass: readFileSync('x') !== '', score: 1})\n",
			`imports "fs"`},
		{"import-type.ts", "import type { Grader } from '@plaited/acp-harness/schemas'\nexport const grade: Grader = () => ({pass: true, score: 1})\n", ""},
		{"inline-type.ts", "import { type Grader } from '@plaited/acp-harness/schemas'\nexport const grade: Grader = () => ({pass: true, score: 1})\n", ""},
		{"type-by-use.ts", "import { Grader } from '@plaited/acp-harness/schemas'\nexport const grade: Grader = () => ({pass: true, score: 1})\n", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := writeConfig(t, c.name, c.src)
			_, err := Load(p, Options{})
			if c.want == "" {
				if err != nil {
					t.Fatalf("want it to load, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("loaded; want a load error")
			}
			want := strings.ReplaceAll(c.want, "DIR", filepath.Dir(p))
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q\nlacks %q", err, want)
			}
			for _, internal := range []string{"GoError", "native", "harness/graders", "\n"} {
				if strings.Contains(err.Error(), internal) {
					t.Errorf("error %q shows %q", err, internal)
				}
			}
		})
	}
}

// A require called while grading (not at load) is a grader error with the
// same message, not a Go stack.
func TestJSRequireWhileGrading(t *testing.T) {
	p := writeConfig(t, "late.js", "exports.grade = function () { return require('left-pad')('x', 3) === '  x' }\n")
	r := grade(t, load(t, p, Options{}), record("x", ""))
	if r.Error == nil || r.Error.Class != schemas.ErrGraderError {
		t.Fatalf("want a grader error, got %+v", r)
	}
	if !strings.Contains(r.Error.Message, `imports "left-pad": the in-process JavaScript runtime cannot load`) || strings.Contains(r.Error.Message, "GoError") {
		t.Errorf("message %q", r.Error.Message)
	}
}
