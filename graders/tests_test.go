package graders

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"harness/schemas"
)

func TestParseTestReports(t *testing.T) {
	goJSON := `{"Action":"start","Package":"m"}
{"Action":"run","Package":"m","Test":"TestA"}
{"Action":"output","Package":"m","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"pass","Package":"m","Test":"TestA"}
{"Action":"run","Package":"m","Test":"TestB"}
{"Action":"output","Package":"m","Test":"TestB","Output":"    b_test.go:9: got 3, want 4\n"}
{"Action":"fail","Package":"m","Test":"TestB"}
{"Action":"skip","Package":"m","Test":"TestC"}
{"Action":"fail","Package":"m"}`
	junit := `<?xml version="1.0"?><testsuites><testsuite name="s">
<testcase classname="pkg.mod" name="test_ok"/>
<testcase classname="pkg.mod" name="test_bad"><failure message="assert 3 == 4">trace line</failure></testcase>
<testcase classname="pkg.mod" name="test_skip"><skipped/></testcase>
</testsuite></testsuites>`
	vitest := `{"testResults":[{"name":"/w/a.test.ts","assertionResults":[
{"fullName":"banner shows status","status":"passed","failureMessages":[]},
{"fullName":"banner links dashboard","status":"failed","failureMessages":["expected 'x' to contain '/dashboard'"]},
{"fullName":"later","status":"skipped"}]}]}`
	tap := "TAP version 13\n1..3\nok 1 - adds\nnot ok 2 - subtracts\n  ---\n  message: 'got 1'\n  ...\nok 3 - skipped one # SKIP not ready\n"
	for _, tc := range []struct {
		name  string
		parse func([]byte) ([]testCase, error)
		in    string
		want  string
	}{
		{"go-test-json", parseGoTestJSON, goJSON, "TestA pass|TestB fail b_test.go:9: got 3, want 4|TestC skip"},
		{"junit", parseJUnit, junit, "pkg.mod > test_ok pass|pkg.mod > test_bad fail assert 3 == 4\ntrace line|pkg.mod > test_skip skip"},
		{"vitest-json", parseVitestJSON, vitest, "banner shows status pass|banner links dashboard fail expected 'x' to contain '/dashboard'|later skip"},
		{"tap", parseTAP, tap, "adds pass|subtracts fail ---\nmessage: 'got 1'\n...|skipped one skip"},
	} {
		cases, err := tc.parse([]byte(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got []string
		for _, c := range cases {
			s := c.Name + " "
			switch {
			case c.Skip:
				s += "skip"
			case c.Pass:
				s += "pass"
			default:
				s += "fail " + c.Message
			}
			got = append(got, s)
		}
		if strings.Join(got, "|") != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, strings.Join(got, "|"), tc.want)
		}
	}
	if _, err := parseJUnit([]byte(`<html/>`)); err == nil {
		t.Error("an HTML page parsed as JUnit")
	}
	if _, err := parseGoTestJSON([]byte("FAIL build failed\n")); err == nil {
		t.Error("non-JSON output parsed as go test -json")
	}
}

// TestTestsGraderRunsGoTest runs real go test -json in a workspace: a
// passing suite passes, a failing test fails with the test named as a
// check (never a grader error), hidden verifier files are copied in, and a
// workspace where no test builds is a grader error.
func TestTestsGraderRunsGoTest(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not on PATH")
	}
	verifier := t.TempDir()
	os.WriteFile(filepath.Join(verifier, "add_test.go"), []byte(`package m
import "testing"
func TestAdd(t *testing.T) { if Add(2, 2) != 4 { t.Errorf("Add(2, 2) = %d, want 4", Add(2, 2)) } }
func TestZero(t *testing.T) { if Add(0, 0) != 0 { t.Error("Add(0, 0) != 0") } }
`), 0o644)
	cfg := writeConfig(t, "tests.json", string(mustJSON(map[string]any{
		"type": "tests", "command": []string{gobin, "test", "-json", "./..."}, "report": "go-test-json", "files": verifier, "timeout": "2m",
	})))
	g := load(t, cfg, Options{})
	workspace := func(add string) *schemas.CaptureRecord {
		ws := t.TempDir()
		os.WriteFile(filepath.Join(ws, "go.mod"), []byte("module m\n\ngo 1.22\n"), 0o644)
		os.WriteFile(filepath.Join(ws, "add.go"), []byte("package m\n\nfunc Add(a, b int) int { return "+add+" }\n"), 0o644)
		rec := record("done", "")
		rec.Workspace = &schemas.Workspace{Path: ws}
		return rec
	}
	r := grade(t, g, workspace("a + b"))
	if r.Error != nil || !r.Pass || r.Score != 1 || len(r.Checks) != 2 || r.Reasoning != "2 of 2 tests passed" {
		t.Errorf("passing suite: %+v", r)
	}
	r = grade(t, g, workspace("a - b"))
	if r.Error != nil || r.Pass || r.Score != 0.5 {
		t.Fatalf("failing test: %+v", r)
	}
	var failed []string
	for _, c := range r.Checks {
		if !c.Pass {
			failed = append(failed, c.Text+": "+fmt.Sprint(c.Evidence))
		}
	}
	if len(failed) != 1 || !strings.HasPrefix(failed[0], "TestAdd: ") || !strings.Contains(failed[0], "Add(2, 2) = 0, want 4") {
		t.Errorf("failed checks %q", failed)
	}
	r = grade(t, g, workspace("a +"))
	if r.Error == nil || r.Error.Class != schemas.ErrGraderError || !strings.Contains(r.Error.Message, "no report") {
		t.Errorf("a workspace that does not build: %+v", r)
	}
	rec := record("done", "")
	if r := grade(t, g, rec); r.Error == nil || !strings.Contains(r.Error.Message, "no workspace") {
		t.Errorf("no workspace: %+v", r.Error)
	}
}

func TestTestsGraderConfigErrors(t *testing.T) {
	for _, c := range []struct{ text, field, msg string }{
		{`{"type":"tests","command":["true"]}`, "report", "missing"},
		{`{"type":"tests","command":["true"],"report":"junit"}`, "report", "needs the report file"},
		{`{"type":"tests","command":["true"],"report":"xunit:x.xml"}`, "report", "unknown report format"},
		{`{"type":"tests","command":["true"],"report":"tap","scoring":"most"}`, "scoring", "unknown scoring"},
		{`{"type":"tests","report":"tap"}`, "command", "missing"},
		{`{"type":"tests","command":["true"],"report":"junit:../out.xml"}`, "report", "inside the workspace"},
	} {
		p := writeConfig(t, "t.json", c.text)
		_, err := Load(p, Options{})
		wantConfigErr(t, err, p, c.field, c.msg)
	}
}

// The verifier files go into the workspace over what the agent left: a
// file of the same name is replaced, a link in their place is replaced,
// not written through, and a link where a verifier directory goes fails
// the grader, with nothing written outside.
func TestTestsGraderFilesOverTheAgentsWork(t *testing.T) {
	verifier, outside := t.TempDir(), t.TempDir()
	for name, content := range map[string]string{"check.sh": "grep -q verifier tests/t.txt && echo 'ok 1 - t'\n", "tests/t.txt": "verifier\n"} {
		os.MkdirAll(filepath.Dir(filepath.Join(verifier, name)), 0o755)
		os.WriteFile(filepath.Join(verifier, name), []byte(content), 0o644)
	}
	os.WriteFile(filepath.Join(outside, "victim"), []byte("keep"), 0o644)
	cfg := writeConfig(t, "tests.json", string(mustJSON(map[string]any{
		"type": "tests", "command": []string{"/bin/sh", "-c", "echo 1..1; sh check.sh"}, "report": "tap", "files": verifier,
	})))
	g := load(t, cfg, Options{})
	grade1 := func(plant func(ws string)) schemas.GraderResult {
		ws := t.TempDir()
		plant(ws)
		rec := record("done", "")
		rec.Workspace = &schemas.Workspace{Path: ws}
		return grade(t, g, rec)
	}
	r := grade1(func(ws string) {
		os.Symlink(filepath.Join(outside, "victim"), filepath.Join(ws, "check.sh"))
		os.MkdirAll(filepath.Join(ws, "tests"), 0o755)
		os.WriteFile(filepath.Join(ws, "tests", "t.txt"), []byte("agent's\n"), 0o644)
	})
	if r.Error != nil || !r.Pass {
		t.Errorf("verifier files over the agent's: %+v", r)
	}
	r = grade1(func(ws string) { os.Symlink(outside, filepath.Join(ws, "tests")) })
	if r.Error == nil || !strings.Contains(r.Error.Message, "not a directory") {
		t.Errorf("a link where a verifier directory goes: %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "victim")); string(b) != "keep" {
		t.Errorf("a file outside was written through a link: %q", b)
	}
	if _, err := os.Stat(filepath.Join(outside, "t.txt")); err == nil {
		t.Error("a verifier file was written outside the workspace")
	}
}
