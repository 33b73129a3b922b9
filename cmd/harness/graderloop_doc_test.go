package main

import (
	"os"
	"strings"
	"testing"
)

// The grader author's loop in docs/graders.md is what
// testdata/script/grader_loop.txtar runs: every command of the doc's block
// is a command of the script (the example agent run by its test name), in
// the same order.
func TestGraderLoopDoc(t *testing.T) {
	doc, err := os.ReadFile("../../docs/graders.md")
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("../../testdata/script/grader_loop.txtar")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "<!-- grader-loop:")
	if !ok {
		t.Fatal("docs/graders.md has no grader-loop block")
	}
	_, block, _ = strings.Cut(block, "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	var want []string
	for _, l := range strings.Split(block, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			want = append(want, "exec "+strings.ReplaceAll(l, "-- go run ./testdata/fakeagent", "-- fakeagent"))
		}
	}
	var got []string
	for _, l := range strings.Split(string(script), "\n") {
		if strings.HasPrefix(l, "exec harness ") || strings.HasPrefix(l, "! exec harness ") {
			got = append(got, strings.TrimPrefix(l, "! "))
		}
	}
	if len(want) < 6 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the script's commands are not the doc's:\nscript:\n%s\ndoc:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
