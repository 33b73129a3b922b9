package capture

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"harness/sandbox"
	"harness/sandbox/egress"
	"harness/sandbox/limits"
	"harness/schemas"
	"harness/testkit/testagents"
)

// echoUnits returns n one-turn units that the fixture agent answers at once.
func echoUnits(n int, text string) []Unit {
	us := make([]Unit, n)
	for i := range us {
		c := &schemas.PromptCase{ID: fmt.Sprintf("c%d", i), Input: schemas.SingleTurn(text)}
		us[i] = Unit{Case: c, Trial: 1}
	}
	return us
}

func benchRun(b *testing.B, cfg Config, units []Unit) {
	r := NewRunner(cfg)
	if _, err := r.Preflight(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	stats, err := r.Run(context.Background(), slices.Values(units), func(*schemas.CaptureRecord) error { return nil })
	b.StopTimer()
	if err != nil || stats.Records != len(units) || stats.InfraErrors() != 0 {
		b.Fatalf("run: %v, %d records, %d errors", err, stats.Records, stats.InfraErrors())
	}
}

func benchConfig(b *testing.B, agentArgs ...string) Config {
	argv, env := testagents.FakeAgent()
	argv = append(argv, agentArgs...)
	return Config{
		Agent:    argv,
		AgentEnv: env,
		Cwd:      b.TempDir(),
		Settle:   0,
	}
}

// BenchmarkCaptureCase is the cost of one case through the whole harness
// (session/new, prompt, recorder, record) on an agent that answers at once.
func BenchmarkCaptureCase(b *testing.B) {
	benchRun(b, benchConfig(b), echoUnits(b.N, "echo hello world, this is an instant agent"))
}

// BenchmarkMinimalDriver is the floor for BenchmarkCaptureCase: the same
// agent and the same messages driven by a bare loop that writes requests
// and reads lines, with no recording. The difference is harness overhead.
func BenchmarkMinimalDriver(b *testing.B) {
	minimalDriver(b, "echo hello world, this is an instant agent")
}

// BenchmarkSlowSessions compares, on an agent that takes 20 ms to answer
// session/new and 20 ms per turn, the harness (which makes the next case's
// session while the current turn runs) with the minimal driver (one
// session/new, then its prompt, case after case): the harness should take
// about half the driver's time per case.
func BenchmarkSlowSessions(b *testing.B) {
	b.Run("harness", func(b *testing.B) {
		benchRun(b, benchConfig(b, "--session-delay", "20"), echoUnits(b.N, "sleep 20"))
	})
	b.Run("driver", func(b *testing.B) {
		minimalDriver(b, "sleep 20", "--session-delay", "20")
	})
}

func minimalDriver(b *testing.B, prompt string, agentArgs ...string) {
	argv, env := testagents.FakeAgent()
	argv = append(argv, agentArgs...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	defer in.Close()
	r := bufio.NewReaderSize(out, 1<<16)
	id := 0
	call := func(method string, params any) json.RawMessage {
		id++
		msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		in.Write(append(msg, '\n'))
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				b.Fatal(err)
			}
			var m struct {
				ID     *int            `json:"id"`
				Method string          `json:"method"`
				Result json.RawMessage `json:"result"`
			}
			json.Unmarshal(line, &m)
			if m.Method == "" && m.ID != nil && *m.ID == id {
				return m.Result
			}
		}
	}
	call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}})
	cwd := b.TempDir()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var s struct{ SessionID string }
		json.Unmarshal(call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}}), &s)
		call("session/prompt", map[string]any{"sessionId": s.SessionID,
			"prompt": []any{map[string]any{"type": "text", "text": prompt}}})
	}
}

// BenchmarkConcurrency runs cases on an agent that sleeps 50 ms per turn
// with 1, 4 and 16 agent processes: ns/op should fall about in proportion.
func BenchmarkConcurrency(b *testing.B) {
	for _, j := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("j=%d", j), func(b *testing.B) {
			cfg := benchConfig(b)
			cfg.Concurrency = j
			benchRun(b, cfg, echoUnits(b.N, "sleep 50"))
		})
	}
}

// BenchmarkAgentStart is the cost of a case that starts its own agent
// process (--fresh-process): without a sandbox; under the bubblewrap
// sandbox as it was before it hid anything (oldBwrap, the baseline); with
// the host's secrets hidden and the environment filtered; with the
// resource caps (their wrapper, cgroups and watcher) too; and with the
// network allowlist too (the proxy session and the bridge inside): the
// default of --sandbox bwrap.
func BenchmarkAgentStart(b *testing.B) {
	caps := limits.DefaultCaps()
	for _, v := range []struct {
		name string
		opts *sandbox.Options
	}{
		{"none", nil},
		{"bwrap-before", nil},
		{"bwrap-hidden", &sandbox.Options{Network: "host"}},
		{"bwrap-hidden-caps", &sandbox.Options{Network: "host", Caps: &caps}},
		{"bwrap-hidden-caps-allow", &sandbox.Options{Allow: []egress.Rule{{Host: "api.anthropic.com", Port: 443}}, Caps: &caps}},
	} {
		b.Run(v.name, func(b *testing.B) {
			cfg := benchConfig(b)
			cfg.FreshProcess = true
			cfg.StartupTimeout = 30 * time.Second
			cfg.TurnTimeout = 30 * time.Second
			switch {
			case v.name == "bwrap-before":
				path, err := exec.LookPath("bwrap")
				if err != nil {
					b.Skip(err)
				}
				cfg.Sandbox = oldBwrap{path: path}
			case v.opts != nil:
				sb, err := sandbox.NewBwrap(*v.opts)
				if err != nil {
					b.Skip(err)
				}
				cfg.Sandbox = sb
			}
			benchRun(b, cfg, echoUnits(b.N, "echo hi"))
		})
	}
}

// oldBwrap wraps commands as the bubblewrap sandbox did before it hid the
// host's secrets, filtered the environment, capped resources or had a
// network of its own: the baseline of BenchmarkAgentStart.
type oldBwrap struct{ path string }

func (o oldBwrap) Wrap(c sandbox.Command) (sandbox.Wrapped, error) {
	home, err := os.MkdirTemp("", "harness-home-")
	if err != nil {
		return sandbox.Wrapped{}, err
	}
	argv := []string{o.path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session"}
	if top := strings.SplitN(strings.TrimPrefix(c.Argv[0], "/tmp/"), "/", 2)[0]; strings.HasPrefix(c.Argv[0], "/tmp/") {
		argv = append(argv, "--ro-bind", "/tmp/"+top, "/tmp/"+top)
	}
	for _, p := range c.RW {
		if p != "" {
			argv = append(argv, "--bind", p, p)
		}
	}
	argv = append(argv, "--bind", home, home)
	if c.Dir != "" {
		argv = append(argv, "--chdir", c.Dir)
	}
	argv = append(argv, "--")
	return sandbox.Wrapped{Argv: append(argv, c.Argv...), Dir: c.Dir, Env: append(c.Env, "HOME="+home),
		Cleanup: func() { os.RemoveAll(home) }}, nil
}

func (oldBwrap) Info() sandbox.Info { return sandbox.Info{Backend: "bwrap"} }

// BenchmarkWarmStart is the wall time per case of one worker running six
// cases back to back, with warm start off (Warm < 0: each unit's agent,
// workspace copy and session are made when its turn comes) and on (the
// next unit's are made while the current one runs), with and without the
// bubblewrap sandbox and a workspace template. The agent takes 200 ms to
// start (a node program, say) and 300 ms a turn, and ignores the end of
// its stdin as the Claude Code adapter does, so it must be signalled to
// go: retiring it stays off the path of the next case either way. Each
// sub-benchmark reports cold-ms/case, warm-ms/case (from the start of the
// run to its last record, over six) and their ratio, all from the same
// run; with warm start a case should take about max(agent start, turn),
// here 300 ms.
func BenchmarkWarmStart(b *testing.B) {
	const cases = 6
	tmpl := b.TempDir()
	if err := os.WriteFile(tmpl+"/file.txt", []byte("hello\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, sb := range []string{"none", "bwrap"} {
		for _, ws := range []bool{false, true} {
			name := "sandbox=" + sb + "/workspace=" + fmt.Sprint(ws)
			b.Run(name, func(b *testing.B) {
				cfg := benchConfig(b, "--ignore-eof", "--on-start", "sleep 0.2")
				cfg.StartupTimeout = 30 * time.Second
				cfg.TurnTimeout = 30 * time.Second
				if ws {
					cfg.Workspace = tmpl
				}
				if sb == "bwrap" {
					s, err := sandbox.NewBwrap(sandbox.Options{Network: "host"})
					if err != nil {
						b.Skip(err)
					}
					cfg.Sandbox = s
				}
				perCase := func(warm int) time.Duration {
					c := cfg
					c.Warm = warm
					r := NewRunner(c)
					if _, err := r.Preflight(context.Background()); err != nil {
						b.Fatal(err)
					}
					// Until the last record is out: the run then waits for
					// its last agent to go, once, not per case.
					start := time.Now()
					var last time.Time
					var mu sync.Mutex
					stats, err := r.Run(context.Background(), slices.Values(echoUnits(cases, "sleep 300")), func(*schemas.CaptureRecord) error {
						mu.Lock()
						last = time.Now()
						mu.Unlock()
						return nil
					})
					if err != nil || stats.Records != cases || stats.InfraErrors() != 0 {
						b.Fatalf("run: %v, %d records, %v errors", err, stats.Records, stats.Errors)
					}
					return last.Sub(start) / cases
				}
				var cold, warm time.Duration
				for range b.N {
					cold += perCase(-1)
					warm += perCase(1)
				}
				ms := func(d time.Duration) float64 { return float64(d) / float64(b.N) / 1e6 }
				b.ReportMetric(ms(cold), "cold-ms/case")
				b.ReportMetric(ms(warm), "warm-ms/case")
				b.ReportMetric(float64(warm)/float64(cold), "warm/cold")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
