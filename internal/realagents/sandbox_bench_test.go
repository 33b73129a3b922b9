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

// sandboxBenchCases is how many one-turn cases each run of
// BenchmarkClaudeCodeSandbox has.
const sandboxBenchCases = 6

// BenchmarkClaudeCodeSandbox is what --sandbox bwrap costs a user of
// Claude Code (its ACP adapter, against the fake Anthropic server): six
// one-turn cases with a workspace template on one worker (-j 1) and the
// default warm start, run without a sandbox (one agent process serves
// every case) and under bubblewrap with its defaults (the network
// allowlist of the model endpoint and the resource caps; an agent process
// per case, started in its copy while the cases before it run), and under
// bubblewrap without caps. Each run has an empty HOME of its own, writable
// in the sandbox too. Each iteration runs the three back to back, in that
// order, each from the making of its sandbox (NewBwrap) to its last
// record, and reports from that one iteration:
//
//   - none-s, bwrap-s, bwrap-nocaps-s: the wall time of each run;
//   - bwrap/none, bwrap-nocaps/none: their ratios (the cost a user sees);
//   - none-first-ms, bwrap-first-ms, bwrap-nocaps-first-ms: when the
//     first case's prompt went out, from the start of its run;
//   - none-start-ms, bwrap-start-ms: the median timing.sessionCreation of
//     the cases (a case's own agent start in the sandbox, initialize and
//     session/new; session/new alone without a sandbox).
func BenchmarkClaudeCodeSandbox(b *testing.B) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv(testagents.RequireEnv) != "" {
			b.Fatal("bwrap not installed (scripts/test installs bubblewrap)")
		}
		b.Skip("bwrap not installed")
	}
	script := testagents.NodeScript(b, "@zed-industries/claude-code-acp/dist/index.js")
	srv := fakemodel.Start(fakemodel.Anthropic, fakemodel.Options{MaxRequests: 1 << 20})
	b.Cleanup(srv.Close)
	base, stderr := sandboxBenchConfig(b, srv, script)
	b.Cleanup(func() {
		if b.Failed() || os.Getenv("REALAGENTS_VERBOSE") != "" {
			b.Logf("agent stderr:\n%s", stderr.String())
		}
	})
	var units []capture.Unit
	for i := range sandboxBenchCases {
		c := &schemas.PromptCase{ID: fmt.Sprintf("c%d", i+1), Input: schemas.SingleTurn(fmt.Sprintf("bash echo case-%d", i+1))}
		units = append(units, capture.Unit{Case: c, Trial: 1})
	}
	caps := limits.DefaultCaps()
	configs := []struct {
		name  string
		caps  *limits.Caps
		bwrap bool
	}{{"none", nil, false}, {"bwrap", &caps, true}, {"bwrap-nocaps", nil, true}}
	wall := map[string]time.Duration{}
	first := map[string]time.Duration{}
	start := map[string]time.Duration{}
	for range b.N {
		for _, c := range configs {
			r := sandboxBenchRun(b, base, c.name, c.bwrap, c.caps, units)
			wall[c.name] += r.wall
			first[c.name] += r.first
			start[c.name] += r.start
		}
	}
	n := float64(b.N)
	for _, c := range configs {
		b.ReportMetric(float64(wall[c.name])/n/1e9, c.name+"-s")
		b.ReportMetric(float64(first[c.name])/n/1e6, c.name+"-first-ms")
	}
	b.ReportMetric(float64(start["none"])/n/1e6, "none-start-ms")
	b.ReportMetric(float64(start["bwrap"])/n/1e6, "bwrap-start-ms")
	b.ReportMetric(float64(wall["bwrap"])/float64(wall["none"]), "bwrap/none")
	b.ReportMetric(float64(wall["bwrap-nocaps"])/float64(wall["none"]), "bwrap-nocaps/none")
	b.ReportMetric(0, "ns/op")
}

// sandboxBenchResult is what one run of the benchmark's cases measured.
type sandboxBenchResult struct {
	wall  time.Duration // from the sandbox's making to the last record
	first time.Duration // from the same start to the first case's prompt
	start time.Duration // median timing.sessionCreation
}

// sandboxBenchRun runs units on a fresh runner, sandboxed or not, checks
// that every case ended its turn with the scripted answer, and returns its
// timings.
func sandboxBenchRun(b *testing.B, cfg capture.Config, name string, bwrap bool, caps *limits.Caps, units []capture.Unit) sandboxBenchResult {
	b.Helper()
	// Each run starts from an empty HOME of its own (Claude Code keeps
	// every session's history in it, and reads it at the next start).
	home, err := os.MkdirTemp(filepath.Dir(envValue(cfg.AgentEnv, "HOME")), "home-")
	if err != nil {
		b.Fatal(err)
	}
	cfg.AgentEnv = setEnvValue(setEnvValue(cfg.AgentEnv, "HOME", home), "CLAUDE_CONFIG_DIR", filepath.Join(home, ".claude"))
	begin := time.Now()
	if bwrap {
		var keep []string
		for _, kv := range cfg.AgentEnv {
			k, _, _ := strings.Cut(kv, "=")
			keep = append(keep, k)
		}
		// HOME stays writable, as without a sandbox: the agents of the
		// run share Claude Code's state there either way.
		bw, err := hsandbox.NewBwrap(hsandbox.Options{RW: []string{home, envValue(cfg.AgentEnv, "TMPDIR")}, KeepEnv: keep,
			Allow: egress.DefaultRules(cfg.AgentEnv, cfg.Agent), Caps: caps})
		if err != nil {
			b.Fatal(err)
		}
		cfg.Sandbox = bw
	}
	r := capture.NewRunner(cfg)
	ctx := context.Background()
	if _, err := r.Preflight(ctx); err != nil {
		b.Fatalf("%s: preflight: %v", name, err)
	}
	var mu sync.Mutex
	var recs []*schemas.CaptureRecord
	stats, err := r.Run(ctx, slices.Values(units), func(rec *schemas.CaptureRecord) error {
		mu.Lock()
		defer mu.Unlock()
		recs = append(recs, rec)
		return nil
	})
	wall := time.Since(begin)
	if err != nil || stats.Records != len(units) || stats.InfraErrors() != 0 {
		b.Fatalf("%s: run: %v, %d records, errors %v", name, err, stats.Records, stats.Errors)
	}
	var starts []time.Duration
	firstPrompt := time.Duration(-1)
	for _, rec := range recs {
		if rec.StopReason != acp.StopEndTurn || !strings.Contains(rec.Output, fakemodel.FinalPrefix) {
			b.Fatalf("%s: case %s: stopReason %q, output %q\n%s", name, rec.ID, rec.StopReason, rec.Output, dump(rec))
		}
		if p := rec.Provenance.Sandbox; bwrap != (p != nil && p.Backend == "bwrap") {
			b.Fatalf("%s: case %s: sandbox %+v", name, rec.ID, p)
		}
		prompt := time.UnixMilli(rec.Timing.Start + rec.Timing.SessionCreation).Sub(begin)
		if firstPrompt < 0 || prompt < firstPrompt {
			firstPrompt = prompt
		}
		if os.Getenv("REALAGENTS_VERBOSE") != "" {
			fmt.Fprintf(os.Stderr, "%s: case %s: began at %d ms, prompt at %d ms, ended at %d ms\n",
				name, rec.ID, rec.Timing.Start-begin.UnixMilli(), prompt.Milliseconds(), rec.Timing.End-begin.UnixMilli())
		}
		starts = append(starts, time.Duration(rec.Timing.SessionCreation)*time.Millisecond)
	}
	return sandboxBenchResult{wall: wall, first: firstPrompt, start: median(starts)}
}

// setEnvValue returns env with key set to value.
func setEnvValue(env []string, key, value string) []string {
	out := []string{key + "=" + value}
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// envValue is the value of key in env ("" when unset).
func envValue(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// sandboxBenchConfig is the capture config of the benchmark, without a
// sandbox: Claude Code pointed at srv, in a scratch HOME, with a one-file
// workspace template and the command line's timeouts and settle time.
// The agent's stderr goes to the buffer returned.
func sandboxBenchConfig(b *testing.B, srv *fakemodel.Server, script string) (capture.Config, *lockedBuffer) {
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
	stderr := &lockedBuffer{}
	return capture.Config{
		Agent:          []string{"node", script},
		AgentEnv:       env,
		AgentDir:       work,
		Cwd:            work,
		Workspace:      tmpl,
		WorkspaceTmp:   tmp,
		Concurrency:    1,
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
