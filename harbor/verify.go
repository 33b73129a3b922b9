package harbor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"

	"harness/image"
	"harness/pytestout"
	"harness/sandbox/egress"
	"harness/schemas"
)

// maxOutput bounds the test.sh and solve.sh output kept (its tail).
const maxOutput = 256 << 10

// Paths inside the trial's image, as Harbor has them.
const (
	TestsPath       = "/tests"
	SolutionPath    = "/solution"
	VerifierLogs    = "/logs/verifier"
	AgentLogs       = "/logs/agent"
	RewardTxt       = VerifierLogs + "/reward.txt"
	RewardJSON      = VerifierLogs + "/reward.json"
	CTRFReport      = VerifierLogs + "/ctrf.json"
	testScript      = TestsPath + "/test.sh"
	solutionScript  = SolutionPath + "/solve.sh"
	GraderName      = "harbor-verifier"
	outputTruncated = "[… earlier output cut …]\n"
)

// Step says how a command run in a trial's layer is set up.
type Step struct {
	// Timeout bounds the command (0 = the task's).
	Timeout time.Duration
	// Env is added to the image's environment and the task's.
	Env []string
	// NoNetwork gives the command loopback only.
	NoNetwork bool
	// Egress, when set, is the command's only way out: it reaches the
	// hosts of the proxy's allowlist through it (a bridge inside the
	// layer, as the agent does) and nothing else.
	Egress *egress.Proxy
	// OnConn is told of each connection the command made through Egress,
	// allowed or refused, once it has ended (all of them before the
	// command's function returns).
	OnConn func(egress.Connection)
	// User is who the command runs as ("" = the task's user for it:
	// [agent] user for solve.sh, [verifier] user for test.sh; else the
	// image's USER).
	User string
	// Binds are host paths made visible in the image.
	Binds []image.Bind
	// Stdout and Stderr, when set, also receive the command's output.
	Stdout, Stderr io.Writer
}

// Ran is what a command run in a layer did.
type Ran struct {
	ExitCode int
	TimedOut bool
	Output   string
	Duration time.Duration
}

// Workdir is where the task's commands start: task.toml's
// environment.workdir, else the image's WORKDIR.
func (t *Task) Workdir(img *image.Image) string {
	if t.Config.Workdir != "" {
		return t.Config.Workdir
	}
	return img.Workdir()
}

// env is the environment of a command: the image's, then the task's
// table, then the step's.
func env(img *image.Image, table map[string]string, extra []string) []string {
	out := img.Env()
	keys := make([]string, 0, len(table))
	for k := range table {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = setEnv(out, k+"="+table[k])
	}
	for _, kv := range extra {
		out = setEnv(out, kv)
	}
	return out
}

func setEnv(env []string, kv string) []string {
	k, _, _ := strings.Cut(kv, "=")
	for i, e := range env {
		if strings.HasPrefix(e, k+"=") {
			env[i] = kv
			return env
		}
	}
	return append(env, kv)
}

// run runs argv in the layer with a timeout, keeping its output's tail.
func run(ctx context.Context, l *image.Layer, argv []string, dir string, environ []string, timeout time.Duration, s Step) (Ran, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	binds, noNetwork, user := s.Binds, s.NoNetwork, s.User
	if s.Egress != nil {
		sess, err := s.Egress.NewSession(s.OnConn)
		if err != nil {
			return Ran{}, fmt.Errorf("network: %w", err)
		}
		// Closed once the command has ended: it waits for the last
		// connections' reports.
		defer sess.Close()
		binds = append(append([]image.Bind(nil), binds...), EgressBinds(sess)...)
		environ = append(append([]string(nil), environ...), sess.Env...)
		noNetwork = true
		if argv, environ, user, err = BridgeAs(l.Image, user, sess, argv, environ); err != nil {
			return Ran{}, err
		}
	}
	cmd, err := l.Command(ctx, image.Run{Argv: argv, Dir: dir, Env: environ, User: user, Binds: binds, NoNetwork: noNetwork})
	if err != nil {
		return Ran{}, err
	}
	tail := &tailBuffer{max: maxOutput}
	var out, errw io.Writer = tail, tail
	if s.Stdout != nil {
		out = io.MultiWriter(tail, s.Stdout)
	}
	if s.Stderr != nil {
		errw = io.MultiWriter(tail, s.Stderr)
	}
	cmd.Stdout, cmd.Stderr = out, errw
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err = cmd.Run()
	r := Ran{Duration: time.Since(start), Output: tail.String()}
	if ctx.Err() == context.DeadlineExceeded {
		r.TimedOut, r.ExitCode = true, -1
		return r, nil
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.ExitCode = ee.ExitCode()
	case err != nil:
		return r, err
	}
	return r, nil
}

// Solve runs the reference solution (solution/solve.sh, copied to
// /solution) in the layer, as Harbor's oracle agent does.
func Solve(ctx context.Context, l *image.Layer, t *Task, s Step) (Ran, error) {
	if err := l.CopyIn(t.SolutionDir(), SolutionPath); err != nil {
		return Ran{}, fmt.Errorf("task %s: copy solution/: %w", t.Name, err)
	}
	timeout := s.Timeout
	if timeout == 0 {
		timeout = t.Config.AgentTimeout
	}
	// solve.sh is the agent: it runs as the agent's user.
	s.User = t.agentUser(s)
	return run(ctx, l, []string{"bash", solutionScript}, t.Workdir(l.Image), env(l.Image, t.SolutionEnv(), s.Env), timeout, s)
}

// Verify runs the task's verifier in the layer the agent left: tests/ is
// copied to /tests (it was not there while the agent worked), anything
// the agent left under /logs/verifier is dropped, and bash
// /tests/test.sh runs with the verifier timeout. The reward it writes
// gives the result: reward.txt (a number) or reward.json (named numbers,
// one check each; the score is "reward" or their mean); a CTRF report
// adds one check per test, and without one the tests pytest's summary
// lines in test.sh's output name do (package pytestout). A missing or
// unreadable reward is a grader error, never a pass or a fail. test.sh's
// output is in Outcome["output"].
func Verify(ctx context.Context, l *image.Layer, t *Task, s Step) schemas.GraderResult {
	start := time.Now()
	if s.Timeout == 0 {
		s.Timeout = t.Config.VerifierTimeout
	}
	res := verify(ctx, l, t, []string{t.TestsDir()}, s)
	res.Grader = GraderName
	res.DurationMs = time.Since(start).Milliseconds()
	return res
}

// verify copies tests (each directory over the ones before) to /tests
// and runs test.sh with s.Timeout.
func verify(ctx context.Context, l *image.Layer, t *Task, tests []string, s Step) schemas.GraderResult {
	fail := func(class, format string, args ...any) schemas.GraderResult {
		return schemas.GraderResult{Error: &schemas.ErrorInfo{Class: class, Message: fmt.Sprintf(format, args...)}}
	}
	if err := l.RemoveAll(VerifierLogs); err != nil {
		return fail(schemas.ErrGraderError, "clear %s: %v", VerifierLogs, err)
	}
	if err := l.RemoveAll(TestsPath); err != nil {
		return fail(schemas.ErrGraderError, "clear %s: %v", TestsPath, err)
	}
	for _, d := range []string{VerifierLogs, AgentLogs} {
		if err := l.MkdirAll(d); err != nil {
			return fail(schemas.ErrGraderError, "make %s: %v", d, err)
		}
	}
	// test.sh writes its reward there as whoever it runs as.
	if err := l.Own(VerifierLogs, t.verifierUser(s)); err != nil {
		return fail(schemas.ErrGraderError, "%s for the verifier's user: %v", VerifierLogs, err)
	}
	for _, dir := range tests {
		if err := l.CopyIn(dir, TestsPath); err != nil {
			return fail(schemas.ErrGraderError, "copy %s to %s: %v", dir, TestsPath, err)
		}
	}
	timeout := s.Timeout
	s.User = t.verifierUser(s)
	ran, err := run(ctx, l, []string{"bash", testScript}, t.Workdir(l.Image), env(l.Image, t.VerifierEnv(), s.Env), timeout, s)
	if err != nil {
		return fail(schemas.ErrGraderError, "run tests/test.sh: %v", err)
	}
	outcome := map[string]any{"exitCode": ran.ExitCode, "output": ran.Output}
	if ran.TimedOut {
		r := fail(schemas.ErrGraderTimeout, "tests/test.sh did not finish within %s", timeout)
		r.Outcome = outcome
		return r
	}
	res := readReward(l)
	res.Outcome = outcome
	if res.Error != nil {
		res.Error.ExitCode = &ran.ExitCode
		res.Error.Stderr = lastLines(ran.Output, 20)
		return res
	}
	outcome["reward"] = res.Score
	ctrf, err := readCTRF(l)
	if err != nil {
		res.Reasoning += fmt.Sprintf("; %s unreadable: %v", CTRFReport, err)
	}
	addTests(&res, ctrf, ran.Output)
	return res
}

// addTests adds the tests of the CTRF report as checks or, when there is
// none, those pytest's summary lines in test.sh's output name, and says
// how many passed.
func addTests(res *schemas.GraderResult, ctrf []schemas.Check, output string) {
	if len(ctrf) > 0 {
		passed := 0
		for _, c := range ctrf {
			if c.Pass {
				passed++
			}
		}
		res.Checks = append(res.Checks, ctrf...)
		res.Reasoning += fmt.Sprintf("; %d of %d tests passed", passed, len(ctrf))
		return
	}
	py := pytestout.Parse(output)
	if !py.Found() {
		return
	}
	res.Checks = append(res.Checks, py.Checks...)
	res.Reasoning += fmt.Sprintf("; %d of %d tests passed (pytest's summary)", py.Passed, py.Total)
}

// readReward reads reward.txt or reward.json.
func readReward(l *image.Layer) schemas.GraderResult {
	if b, err := l.ReadFile(RewardTxt); err == nil {
		text := strings.TrimSpace(string(b))
		v, err := strconv.ParseFloat(text, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return schemas.GraderResult{Error: &schemas.ErrorInfo{Class: schemas.ErrGraderInvalid, Message: fmt.Sprintf("%s holds %q, not a number", RewardTxt, clip(text, 80))}}
		}
		return schemas.GraderResult{Score: v, Pass: v >= 1, Reasoning: fmt.Sprintf("reward %s (%s)", text, RewardTxt)}
	}
	b, err := l.ReadFile(RewardJSON)
	if err != nil {
		return schemas.GraderResult{Error: &schemas.ErrorInfo{Class: schemas.ErrGraderError, Message: fmt.Sprintf("tests/test.sh wrote neither %s nor %s", RewardTxt, RewardJSON)}}
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		return schemas.GraderResult{Error: &schemas.ErrorInfo{Class: schemas.ErrGraderInvalid, Message: fmt.Sprintf("%s: %v", RewardJSON, err)}}
	}
	var keys []string
	for k, v := range raw {
		if _, ok := v.(float64); ok {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return schemas.GraderResult{Error: &schemas.ErrorInfo{Class: schemas.ErrGraderInvalid, Message: fmt.Sprintf("%s has no numbers", RewardJSON)}}
	}
	sort.Strings(keys)
	res := schemas.GraderResult{}
	sum := 0.0
	for _, k := range keys {
		v := raw[k].(float64)
		sum += v
		if k == "reward" {
			continue
		}
		score := v
		res.Checks = append(res.Checks, schemas.Check{Text: k, Pass: v >= 1, Score: &score})
	}
	if v, ok := raw["reward"].(float64); ok {
		res.Score = v
		res.Reasoning = fmt.Sprintf("reward %g (%s)", v, RewardJSON)
	} else {
		res.Score = sum / float64(len(keys))
		res.Reasoning = fmt.Sprintf("reward %g, the mean of %d values (%s)", res.Score, len(keys), RewardJSON)
	}
	res.Pass = res.Score >= 1
	return res
}

// readCTRF reads the CTRF report, when the verifier wrote one, as one
// check per test.
func readCTRF(l *image.Layer) ([]schemas.Check, error) {
	b, err := l.ReadFile(CTRFReport)
	if err != nil {
		return nil, nil
	}
	var rep struct {
		Results struct {
			Tests []struct {
				Name    string `json:"name"`
				Status  string `json:"status"`
				Message string `json:"message"`
				Trace   string `json:"trace"`
			} `json:"tests"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, err
	}
	var out []schemas.Check
	for _, tc := range rep.Results.Tests {
		c := schemas.Check{Text: tc.Name, Pass: tc.Status == "passed", Reason: tc.Status}
		switch tc.Status {
		case "passed":
		case "skipped", "pending":
			c.Pass = true
		default:
			msg := tc.Message
			if msg == "" {
				msg = tc.Trace
			}
			if msg != "" {
				c.Reason = tc.Status + ": " + clip(strings.TrimSpace(msg), 2000)
			}
		}
		out = append(out, c)
	}
	return out, nil
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	buf  bytes.Buffer
	max  int
	lost bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
		t.lost = true
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	if t.lost {
		return outputTruncated + t.buf.String()
	}
	return t.buf.String()
}
