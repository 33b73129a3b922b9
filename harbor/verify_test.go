package harbor

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"harness/image"
	"harness/schemas"
)

// TestMain lets the test binary stand in for the harness binary as the
// init of commands run in image layers.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == image.InitArg {
		os.Exit(image.Main(os.Args[2:], os.Stderr))
	}
	dir, err := os.MkdirTemp("", "harbor-test-images-")
	if err != nil {
		panic(err)
	}
	sharedStore = &image.Store{Dir: dir}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// sharedStore is the image cache the tests share, so each task's image
// is unpacked once per test run.
var sharedStore *image.Store

// requireBaseImage skips (or, in CI, fails) a test that needs podman and
// the base image scripts/build-base-image makes.
func requireBaseImage(t *testing.T) {
	t.Helper()
	msg := ""
	if _, err := exec.LookPath("podman"); err != nil {
		msg = "podman is not installed"
	} else if err := exec.Command("podman", "image", "exists", "localhost/harness-base:bookworm").Run(); err != nil {
		msg = "the base image is missing: run scripts/build-base-image"
	}
	if msg == "" {
		return
	}
	if os.Getenv("HARNESS_REQUIRE_AGENTS") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

type fixture struct {
	tasks map[string]*Task
	imgs  map[string]*image.Image
	self  []string
}

func loadFixture(t *testing.T) *fixture {
	t.Helper()
	requireBaseImage(t)
	tasks, err := LoadDataset("../testdata/tasks")
	if err != nil {
		t.Fatal(err)
	}
	store := sharedStore
	self, _ := os.Executable()
	f := &fixture{tasks: map[string]*Task{}, imgs: map[string]*image.Image{}, self: []string{self, image.InitArg}}
	for _, task := range tasks {
		img, err := store.Resolve(context.Background(), task.Image)
		if err != nil {
			t.Fatal(err)
		}
		f.tasks[task.Name], f.imgs[task.Name] = task, img
	}
	return f
}

func (f *fixture) layer(t *testing.T, name string) *image.Layer {
	l, err := image.NewLayer(f.imgs[name], t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l.Self = f.self
	return l
}

// agent runs a bash script in the layer as the agent would.
func (f *fixture) agent(t *testing.T, l *image.Layer, script string) string {
	t.Helper()
	cmd, err := l.Command(context.Background(), image.Run{Argv: []string{"bash", "-c", script}, Env: l.Image.Env()})
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("agent: %v: %s", err, out)
	}
	return string(out)
}

func TestTestdataReferences(t *testing.T) {
	f := loadFixture(t)
	lock := t.TempDir()
	for _, name := range []string{"broken-reference", "column-sum", "csv-to-json", "env-vars", "fix-greeting", "fix-shout", "prebuilt-image", "quiet-bench", "text-transforms"} {
		for _, agent := range []string{Oracle, Nop} {
			// quiet-bench's lock is this test's own (testdata/tasks/README.md).
			step := Step{Env: []string{"HARNESS_QUIET_LOCK=" + lock}}
			res, err := RunReference(context.Background(), f.tasks[name], f.imgs[name], agent, TrialOptions{LayerDir: t.TempDir(), Self: f.self, Step: step})
			if err != nil {
				t.Fatal(err)
			}
			wantOK := !(name == "broken-reference" && agent == Oracle)
			if res.OK != wantOK || res.Verdict.Error != nil {
				t.Errorf("%s %s: ok=%v score=%v err=%+v output=%q", name, agent, res.OK, res.Verdict.Score, res.Verdict.Error, res.Verdict.Outcome["output"])
			}
		}
	}
}

func TestVerifierSeesTheAgentsLayerAndTestsOnlyAfterIt(t *testing.T) {
	f := loadFixture(t)
	l := f.layer(t, "fix-greeting")
	// The agent fixes the script, finds no /tests, and plants a reward
	// that must not count.
	out := f.agent(t, l, `test -e /tests && echo "tests visible"; sed -i 's/return "Hello " + name/return "Hello, " + name + "!"/' /app/greet.py; mkdir -p /logs/verifier; echo 0.3 > /logs/verifier/reward.txt; pwd`)
	if strings.Contains(out, "tests visible") || strings.TrimSpace(out) != "/app" {
		t.Fatalf("agent saw: %q", out)
	}
	res := Verify(context.Background(), l, f.tasks["fix-greeting"], Step{})
	if res.Error != nil || res.Score != 1 || !res.Pass || res.Grader != GraderName {
		t.Fatalf("verdict %+v", res)
	}
	if len(res.Checks) != 3 || res.Checks[0].Text != "test_greets_ada" || !res.Checks[0].Pass {
		t.Fatalf("checks %+v", res.Checks)
	}
	if out, _ := res.Outcome["output"].(string); !strings.Contains(out, "PASSED test_greets_ada") {
		t.Fatalf("test.sh output not kept: %q", out)
	}
	// The tests and logs are in the layer's change set, beside the fix.
	changes, err := l.Changes()
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{}
	for _, c := range changes {
		paths[c.Path] = c.Status
	}
	if paths["/app/greet.py"] != "modified" || paths["/tests/test.sh"] != "added" || paths["/logs/verifier/reward.txt"] != "added" {
		t.Fatalf("changes %v", changes)
	}
}

func TestCTRFFailuresAreChecks(t *testing.T) {
	f := loadFixture(t)
	l := f.layer(t, "fix-greeting")
	f.agent(t, l, `sed -i 's/return "Hello " + name/return "Hello, " + name/' /app/greet.py`)
	res := Verify(context.Background(), l, f.tasks["fix-greeting"], Step{})
	if res.Error != nil || res.Score != 0 || res.Pass {
		t.Fatalf("verdict %+v", res)
	}
	if len(res.Checks) != 3 || res.Checks[0].Pass || !strings.Contains(res.Checks[0].Reason, "failed: got 'Hello, Ada\\n'") || !res.Checks[2].Pass {
		t.Fatalf("checks %+v", res.Checks)
	}
	if !strings.Contains(res.Reasoning, "1 of 3 tests passed") {
		t.Fatalf("reasoning %q", res.Reasoning)
	}
}

func TestRewardJSONGivesPartialCredit(t *testing.T) {
	f := loadFixture(t)
	l := f.layer(t, "text-transforms")
	f.agent(t, l, `wc -l < input.txt > count.txt; tac input.txt > reversed.txt; echo wrong > upper.txt`)
	res := Verify(context.Background(), l, f.tasks["text-transforms"], Step{})
	if res.Error != nil || res.Pass || res.Score < 0.66 || res.Score > 0.67 {
		t.Fatalf("verdict %+v", res)
	}
	got := map[string]bool{}
	for _, c := range res.Checks {
		got[c.Text] = c.Pass
	}
	if len(got) != 3 || !got["count"] || got["upper"] || !got["reversed"] {
		t.Fatalf("checks %+v", res.Checks)
	}
}

func TestMissingOrBadRewardIsAGraderError(t *testing.T) {
	f := loadFixture(t)
	task := *f.tasks["column-sum"]
	tests := t.TempDir()
	task.Dir = filepath.Dir(tests)
	// TestsDir is Dir/tests: point the task at a directory of our own.
	task.Dir = t.TempDir()
	os.MkdirAll(filepath.Join(task.Dir, "tests"), 0o755)
	for script, class := range map[string]string{
		"echo no reward; exit 1":                             schemas.ErrGraderError,
		"echo lots > /logs/verifier/reward.txt":              schemas.ErrGraderInvalid,
		"echo '{\"a\": \"x\"}' > /logs/verifier/reward.json": schemas.ErrGraderInvalid,
		"sleep 30; echo 1 > /logs/verifier/reward.txt":       schemas.ErrGraderTimeout,
	} {
		os.WriteFile(filepath.Join(task.Dir, "tests", "test.sh"), []byte(script+"\n"), 0o755)
		l := f.layer(t, "column-sum")
		res := Verify(context.Background(), l, &task, Step{Timeout: 2 * time.Second})
		if res.Error == nil || res.Error.Class != class || res.Pass || res.Score != 0 {
			t.Errorf("%q: %+v", script, res)
		}
	}
}

func TestRewardJSONRewardKeyIsTheScore(t *testing.T) {
	f := loadFixture(t)
	task := *f.tasks["column-sum"]
	// TestsDir is Dir/tests: point the task at a directory of our own.
	task.Dir = t.TempDir()
	os.MkdirAll(filepath.Join(task.Dir, "tests"), 0o755)
	for _, c := range []struct {
		reward string
		score  float64
		pass   bool
		checks map[string]bool
	}{
		// The mean of the others would be 1: "reward" decides.
		{`{"reward": 0.25, "build": 1, "tests": 1}`, 0.25, false, map[string]bool{"build": true, "tests": true}},
		{`{"tests": 0, "reward": 1}`, 1, true, map[string]bool{"tests": false}},
		{`{"reward": 0}`, 0, false, map[string]bool{}},
	} {
		os.WriteFile(filepath.Join(task.Dir, "tests", "test.sh"), []byte("echo '"+c.reward+"' > /logs/verifier/reward.json\n"), 0o755)
		res := Verify(context.Background(), f.layer(t, "column-sum"), &task, Step{})
		if res.Error != nil || res.Score != c.score || res.Pass != c.pass || !strings.Contains(res.Reasoning, "reward.json") {
			t.Errorf("%s: %+v", c.reward, res)
			continue
		}
		got := map[string]bool{}
		for _, ch := range res.Checks {
			got[ch.Text] = ch.Pass
		}
		if !maps.Equal(got, c.checks) {
			t.Errorf("%s: checks %+v, want %v", c.reward, res.Checks, c.checks)
		}
	}
}

func TestTaskNeedsItsImagesPackage(t *testing.T) {
	f := loadFixture(t)
	if _, err := exec.LookPath("datamash"); err == nil {
		t.Log("the host has datamash too; the check below still runs in the image")
	}
	if !f.imgs["column-sum"].Exists("/usr/bin/datamash") {
		t.Fatal("the column-sum image lacks datamash")
	}
	l := f.layer(t, "column-sum")
	ran, err := Solve(context.Background(), l, f.tasks["column-sum"], Step{NoNetwork: true})
	if err != nil || ran.ExitCode != 0 {
		t.Fatalf("solve: %v %+v", err, ran)
	}
	b, err := l.ReadFile("/app/totals.tsv")
	if err != nil || string(b) != "east\t10\nnorth\t42\nsouth\t6\nwest\t9\n" {
		t.Fatalf("totals %q, %v", b, err)
	}
}

func TestARewardTheAgentLeftDoesNotCount(t *testing.T) {
	f := loadFixture(t)
	task := *f.tasks["column-sum"]
	task.Dir = t.TempDir()
	os.MkdirAll(filepath.Join(task.Dir, "tests"), 0o755)
	os.WriteFile(filepath.Join(task.Dir, "tests", "test.sh"), []byte("echo verifier wrote nothing\n"), 0o755)
	l := f.layer(t, "column-sum")
	f.agent(t, l, `mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && echo '{"reward": 1}' > /logs/verifier/reward.json`)
	res := Verify(context.Background(), l, &task, Step{})
	if res.Error == nil || res.Error.Class != schemas.ErrGraderError || res.Pass {
		t.Fatalf("verdict %+v", res)
	}
}

func TestSolveHasLoopbackOnlyWithoutInternet(t *testing.T) {
	f := loadFixture(t)
	task := *f.tasks["column-sum"]
	if task.Config.AllowInternet {
		t.Fatal("column-sum should have allow_internet = false")
	}
	task.Dir = t.TempDir()
	for name, body := range map[string]string{
		"solution/solve.sh": "grep -o '^ *[a-z0-9]*:' /proc/net/dev | tr -d ' :' > /app/ifaces\n",
		"tests/test.sh":     "test \"$(cat /app/ifaces)\" = lo && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n",
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(task.Dir, name)), 0o755)
		os.WriteFile(filepath.Join(task.Dir, name), []byte(body), 0o755)
	}
	res, err := RunReference(context.Background(), &task, f.imgs["column-sum"], Oracle, TrialOptions{LayerDir: t.TempDir(), Self: f.self})
	if err != nil || !res.OK {
		t.Fatalf("%v: %+v", err, res)
	}
}

// A verifier that writes no CTRF report but runs pytest -rA (as the
// field's tasks do) gets one check per test from pytest's summary, the
// failed ones with their report section as evidence; a CTRF report wins.
func TestPytestSummaryGivesChecksWithoutCTRF(t *testing.T) {
	out, err := os.ReadFile("../pytestout/testdata/rA.txt")
	if err != nil {
		t.Fatal(err)
	}
	res := schemas.GraderResult{Reasoning: "reward 0 (" + RewardTxt + ")"}
	addTests(&res, nil, string(out))
	if len(res.Checks) != 8 {
		t.Fatalf("%d checks, want 8: %+v", len(res.Checks), res.Checks)
	}
	if want := "reward 0 (/logs/verifier/reward.txt); 5 of 8 tests passed (pytest's summary)"; res.Reasoning != want {
		t.Errorf("reasoning %q, want %q", res.Reasoning, want)
	}
	var failed *schemas.Check
	for i := range res.Checks {
		if !res.Checks[i].Pass && res.Checks[i].Text == "tests/test_outputs.py::test_run_exists" {
			failed = &res.Checks[i]
		}
	}
	if failed == nil {
		t.Fatalf("no failed check for test_run_exists: %+v", res.Checks)
	}
	if ev, _ := failed.Evidence.(string); !strings.Contains(ev, "AssertionError: File /app/run.py does not exist") {
		t.Errorf("evidence %q", failed.Evidence)
	}

	ctrf := []schemas.Check{{Text: "test_a", Pass: true}}
	res = schemas.GraderResult{}
	addTests(&res, ctrf, string(out))
	if len(res.Checks) != 1 || res.Reasoning != "; 1 of 1 tests passed" {
		t.Errorf("with CTRF: %+v", res)
	}
	res = schemas.GraderResult{}
	addTests(&res, nil, "no tests here\n")
	if len(res.Checks) != 0 || res.Reasoning != "" {
		t.Errorf("output without pytest: %+v", res)
	}
}
