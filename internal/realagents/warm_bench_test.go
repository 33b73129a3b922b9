package realagents

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"harness/acp"
	"harness/capture"
	"harness/internal/buildinfo"
	hsandbox "harness/sandbox"
	"harness/sandbox/egress"
	"harness/sandbox/limits"
	"harness/schemas"
	"harness/testkit/fakemodel"
	"harness/testkit/testagents"
)

// warmBenchCases is how many cases each run of BenchmarkClaudeCodeWarm
// has: enough for the four workers to take two rounds.
const warmBenchCases = 8

// BenchmarkClaudeCodeWarm is the wall time per case of Claude Code (its
// ACP adapter, against the fake Anthropic server) under --sandbox bwrap
// with a workspace template, where every case has an agent process of its
// own: one worker with warm start off (Warm < 0: each case's workspace
// copy, agent and session are made when its turn comes), one worker with
// warm start on (the next case's are made while the current one's turn
// runs), one worker two cases ahead (--warm 2), and four workers with
// warm start on. Every case is one turn: the model calls one tool, then
// answers.
//
// Each iteration runs the four configurations back to back and reports,
// all from that one iteration:
//
//   - warm0-ms/case, warm1-ms/case, warm2-ms/case, j4-ms/case: from the
//     start of the run to its last record, over the number of cases;
//   - warm1-steady-ms/case: from the first record to the last, over the
//     cases after the first (the first case cannot be prepared ahead);
//   - start-ms: the agent's start, the median of the warm-0 records'
//     timing.sessionCreation (workspace copy, agent start in the sandbox,
//     initialize, session/new), made with nothing else running;
//   - turn-ms: the median of the warm-0 records' turn (timing.total less
//     timing.sessionCreation);
//   - goal-ms: max(start-ms, turn-ms) + 200, what a case should take at
//     most with warm start on, and warm1/warm0, warm2/warm0, j4/warm0.
func BenchmarkClaudeCodeWarm(b *testing.B) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv(testagents.RequireEnv) != "" {
			b.Fatal("bwrap not installed (scripts/test installs bubblewrap)")
		}
		b.Skip("bwrap not installed")
	}
	script := testagents.NodeScript(b, "@zed-industries/claude-code-acp/dist/index.js")
	srv := fakemodel.Start(fakemodel.Anthropic, fakemodel.Options{MaxRequests: 1 << 20})
	b.Cleanup(srv.Close)
	cfg, stderr := warmBenchConfig(b, srv, script)
	b.Cleanup(func() {
		if b.Failed() || os.Getenv("REALAGENTS_VERBOSE") != "" {
			b.Logf("agent stderr:\n%s", stderr.String())
		}
	})

	var units []capture.Unit
	for i := range warmBenchCases {
		in := fmt.Sprintf("bash echo case-%d", i+1)
		if i%2 == 1 {
			in = "plan the work"
		}
		c := &schemas.PromptCase{ID: fmt.Sprintf("c%d", i+1), Input: schemas.SingleTurn(in)}
		units = append(units, capture.Unit{Case: c, Trial: 1})
	}

	var warm0, warm1, steady1, warm2, j4, start, turn time.Duration
	for range b.N {
		r := warmBenchRun(b, cfg, -1, 1, units)
		warm0 += r.perCase
		start += r.start
		turn += r.turn
		r = warmBenchRun(b, cfg, 1, 1, units)
		warm1 += r.perCase
		steady1 += r.steady
		warm2 += warmBenchRun(b, cfg, 2, 1, units).perCase
		j4 += warmBenchRun(b, cfg, 1, 4, units).perCase
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(b.N) / 1e6 }
	b.ReportMetric(ms(warm0), "warm0-ms/case")
	b.ReportMetric(ms(warm1), "warm1-ms/case")
	b.ReportMetric(ms(steady1), "warm1-steady-ms/case")
	b.ReportMetric(ms(warm2), "warm2-ms/case")
	b.ReportMetric(ms(j4), "j4-ms/case")
	b.ReportMetric(ms(start), "start-ms")
	b.ReportMetric(ms(turn), "turn-ms")
	b.ReportMetric(ms(max(start, turn))+200, "goal-ms")
	b.ReportMetric(float64(warm1)/float64(warm0), "warm1/warm0")
	b.ReportMetric(float64(warm2)/float64(warm0), "warm2/warm0")
	b.ReportMetric(float64(j4)/float64(warm0), "j4/warm0")
	b.ReportMetric(0, "ns/op")
}

// warmBenchResult is what one run of the benchmark's cases measured.
type warmBenchResult struct {
	perCase     time.Duration // run start to last record, over the cases
	steady      time.Duration // first record to last, over the cases after the first
	start, turn time.Duration // medians over the records
}

// warmBenchRun runs units on a fresh runner with the given warm depth and
// workers, checks that every case ended its turn with the scripted answer,
// and returns its timings.
func warmBenchRun(b *testing.B, cfg capture.Config, warm, workers int, units []capture.Unit) warmBenchResult {
	b.Helper()
	cfg.Warm = warm
	cfg.Concurrency = workers
	r := capture.NewRunner(cfg)
	ctx := context.Background()
	if _, err := r.Preflight(ctx); err != nil {
		b.Fatalf("warm %d, %d workers: preflight: %v", warm, workers, err)
	}
	var mu sync.Mutex
	var recs []*schemas.CaptureRecord
	var first, last time.Time
	begin := time.Now()
	stats, err := r.Run(ctx, slices.Values(units), func(rec *schemas.CaptureRecord) error {
		mu.Lock()
		defer mu.Unlock()
		last = time.Now()
		if first.IsZero() {
			first = last
		}
		recs = append(recs, rec)
		return nil
	})
	if err != nil || stats.Records != len(units) || stats.InfraErrors() != 0 {
		b.Fatalf("warm %d, %d workers: run: %v, %d records, errors %v", warm, workers, err, stats.Records, stats.Errors)
	}
	var starts, turns []time.Duration
	for _, rec := range recs {
		if rec.StopReason != acp.StopEndTurn || !strings.Contains(rec.Output, fakemodel.FinalPrefix) {
			b.Fatalf("warm %d, %d workers: case %s: stopReason %q, output %q\n%s", warm, workers, rec.ID, rec.StopReason, rec.Output, dump(rec))
		}
		if p := rec.Provenance.Sandbox; p == nil || p.Backend != "bwrap" {
			b.Fatalf("case %s ran outside the sandbox: %+v", rec.ID, p)
		}
		if os.Getenv("REALAGENTS_VERBOSE") != "" {
			fmt.Fprintf(os.Stderr, "warm %d, %d workers: case %s: began at %d ms, session/new after %d ms, ended at %d ms\n",
				warm, workers, rec.ID, rec.Timing.Start-begin.UnixMilli(), rec.Timing.SessionCreation, rec.Timing.End-begin.UnixMilli())
		}
		starts = append(starts, time.Duration(rec.Timing.SessionCreation)*time.Millisecond)
		turns = append(turns, time.Duration(rec.Timing.Total-rec.Timing.SessionCreation)*time.Millisecond)
	}
	n := time.Duration(len(units))
	return warmBenchResult{
		perCase: last.Sub(begin) / n,
		steady:  last.Sub(first) / (n - 1),
		start:   median(starts),
		turn:    median(turns),
	}
}

// median is the middle value of ds (the mean of the two middle ones when
// there is an even number).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// warmBenchConfig is the capture config of the benchmark: Claude Code
// pointed at srv, in a scratch HOME, under --sandbox bwrap with its
// defaults (the network allowlist of the model endpoint, the resource
// caps) and a one-file workspace template, with the command line's
// timeouts and settle time. The agent's stderr goes to the buffer
// returned.
func warmBenchConfig(b *testing.B, srv *fakemodel.Server, script string) (capture.Config, *lockedBuffer) {
	b.Helper()
	root := b.TempDir()
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	home, tmp, work, tmpl := filepath.Join(root, "home"), filepath.Join(root, "tmp"), filepath.Join(root, "work"), filepath.Join(root, "template")
	for _, d := range []string{home, tmp, work, tmpl} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(tmpl, "README"), []byte("template\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"TMPDIR=" + tmp,
		"LANG=C.UTF-8",
		"TERM=dumb",
		"NO_COLOR=1",
		"ANTHROPIC_BASE_URL=" + srv.URL,
		"ANTHROPIC_API_KEY=dummy",
		"CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude"),
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_ERROR_REPORTING=1",
	}
	agent := []string{"node", script}
	var keep []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		keep = append(keep, k)
	}
	caps := limits.DefaultCaps()
	bw, err := hsandbox.NewBwrap(hsandbox.Options{HomeTemplate: home, RW: []string{home, tmp}, KeepEnv: keep,
		Allow: egress.DefaultRules(env, agent), Caps: &caps})
	if err != nil {
		b.Fatal(err)
	}
	stderr := &lockedBuffer{}
	return capture.Config{
		Agent:          agent,
		AgentEnv:       env,
		AgentDir:       work,
		Cwd:            work,
		Workspace:      tmpl,
		Sandbox:        bw,
		TurnTimeout:    60 * time.Second,
		StartupTimeout: 60 * time.Second,
		CancelGrace:    5 * time.Second,
		Settle:         250 * time.Millisecond,
		Build:          buildinfo.Info{Version: "bench"},
		StderrCopy:     stderr,
		Client: acp.Options{
			ClientInfo: acp.Implementation{Name: "harness-realagents-bench", Version: "0"},
			Permission: acp.PolicyAllow,
		},
	}, stderr
}
