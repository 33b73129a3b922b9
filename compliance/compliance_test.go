package compliance

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"harness/acp"
	"harness/testkit/testagents"
)

func TestMain(m *testing.M) { os.Exit(testagents.FakeAgentMain(m)) }

func fakeOptions(t *testing.T, agentArgs ...string) Options {
	t.Helper()
	argv, env := testagents.FakeAgent(agentArgs...)
	return Options{
		Agent:       argv,
		Env:         env,
		Cwd:         t.TempDir(),
		Timeout:     10 * time.Second,
		CancelGrace: 2 * time.Second,
		Settle:      100 * time.Millisecond,
		EOFGrace:    2 * time.Second,
		Client:      acp.Options{Permission: acp.PolicyDeny},
	}
}

func check(t *testing.T, r *Report, id string) Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", id, r.Checks)
	return Check{}
}

// Every check is reported once, in order, whatever happens.
func TestChecksAlwaysComplete(t *testing.T) {
	t.Parallel()
	var want []string
	for _, d := range checkOrder() {
		want = append(want, d.id)
	}
	for _, args := range [][]string{nil, {"--exit-before-init"}, {"--protocol", "2"}, {"--auth-required"}} {
		rep := Run(context.Background(), fakeOptions(t, args...))
		var got []string
		for _, c := range rep.Checks {
			got = append(got, c.ID)
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%v: checks\n got %v\nwant %v", args, got, want)
		}
		if usable := args == nil; rep.Usable != usable {
			t.Errorf("%v: usable = %v", args, rep.Usable)
		}
	}
}

func TestCompliantReport(t *testing.T) {
	t.Parallel()
	o := fakeOptions(t, "--early-updates")
	o.Prompt = "echo hello"
	o.CancelPrompt = "slow 5000"
	rep := Run(context.Background(), o)
	if !rep.Usable || len(rep.Failed()) != 0 {
		t.Fatalf("not usable: %+v", rep.Failed())
	}
	if rep.AgentInfo == nil || rep.AgentInfo.Name != "fakeagent" || rep.ProtocolVersion == nil || *rep.ProtocolVersion != 1 {
		t.Errorf("agent info %+v, protocol %v", rep.AgentInfo, rep.ProtocolVersion)
	}
	if len(rep.AuthMethods) != 1 || rep.AuthMethods[0].ID != "test-key" {
		t.Errorf("auth methods %+v", rep.AuthMethods)
	}
	if rep.SetupUpdates != 1 || rep.SetupKinds[0] != "available_commands_update" {
		t.Errorf("setup updates %d %v", rep.SetupUpdates, rep.SetupKinds)
	}
	if p := rep.Prompt; p == nil || p.StopReason != "end_turn" || p.Output != "hello" || p.Updates != 2 || p.LateUpdates != 0 {
		t.Errorf("prompt turn %+v", rep.Prompt)
	}
	if c := rep.Cancel; c == nil || !c.CancelSent || c.StopReason != "cancelled" || c.CancelToAnswerMs == nil || *c.CancelToAnswerMs > 1000 {
		t.Errorf("cancel turn %+v", rep.Cancel)
	}
	if rep.ExitedOnEOF == nil || !*rep.ExitedOnEOF || rep.ExitCode == nil || *rep.ExitCode != 0 {
		t.Errorf("exit on EOF %v code %v", rep.ExitedOnEOF, rep.ExitCode)
	}
	if c := check(t, rep, CheckCancel); c.Status != Pass {
		t.Errorf("cancel check %+v", c)
	}
}

// The session/cancel goes out at the turn's first update, not only after
// CancelAfter: a long CancelAfter must not delay it.
func TestCancelAtFirstUpdate(t *testing.T) {
	t.Parallel()
	o := fakeOptions(t)
	o.CancelPrompt = "slow 5000"
	o.CancelAfter = 4 * time.Second
	start := time.Now()
	rep := Run(context.Background(), o)
	if c := rep.Cancel; c == nil || c.StopReason != "cancelled" || c.DurationMs > 2000 {
		t.Errorf("cancel turn %+v", rep.Cancel)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("probe took %s", d)
	}
}

// A turn without updates is cancelled after CancelAfter.
func TestCancelAfterQuietStart(t *testing.T) {
	t.Parallel()
	o := fakeOptions(t)
	o.CancelPrompt = "sleep 5000"
	o.CancelAfter = 200 * time.Millisecond
	rep := Run(context.Background(), o)
	if c := rep.Cancel; c == nil || c.StopReason != "cancelled" || c.DurationMs < 150 || c.DurationMs > 2000 {
		t.Errorf("cancel turn %+v", rep.Cancel)
	}
}

func TestTextReport(t *testing.T) {
	t.Parallel()
	rep := Run(context.Background(), fakeOptions(t, "--banner", "--stderr-spam", "2"))
	var b strings.Builder
	if err := WriteText(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"✓ initialize answered [required]",
		"✗ stdout holds only protocol messages: the agent writes non-protocol output to stdout: 1 line(s)",
		"  | fakeagent: stderr spam line 2/2\n",
		"USABLE, with 1 advisory failure(s): stdout holds only protocol messages\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

// TestSDKExampleAgent probes the example agent of @agentclientprotocol/sdk,
// a spec-compliant agent nobody here wrote (the TypeScript tool's
// adapter:check fails it): it must come out usable with no failed check,
// and its cancelled turn must answer "cancelled".
func TestSDKExampleAgent(t *testing.T) {
	t.Parallel()
	script := testagents.NodeScript(t, "@agentclientprotocol/sdk/dist/examples/agent.js")
	o := fakeOptions(t)
	o.Agent = []string{"node", script}
	o.Env = os.Environ()
	o.Timeout = 30 * time.Second
	o.CancelGrace = 5 * time.Second
	rep := Run(context.Background(), o)
	if !rep.Usable || len(rep.Failed()) > 0 {
		var b strings.Builder
		WriteText(&b, rep)
		t.Fatalf("SDK example agent not passed:\n%s", b.String())
	}
	if rep.ProtocolVersion == nil || *rep.ProtocolVersion != 1 {
		t.Errorf("protocol %v", rep.ProtocolVersion)
	}
	if p := rep.Prompt; p.StopReason != "end_turn" || !strings.HasPrefix(p.Output, "I'll help you with that.") || p.Updates < 4 {
		t.Errorf("prompt turn %+v", p)
	}
	if c := rep.Cancel; !c.CancelSent || c.StopReason != "cancelled" {
		t.Errorf("cancel turn %+v", c)
	}
	if c := check(t, rep, CheckAgentInfo); c.Status != Warn {
		t.Errorf("agentInfo check %+v (the example sends none)", c)
	}
	if rep.ExitedOnEOF == nil || !*rep.ExitedOnEOF {
		t.Errorf("did not exit on EOF")
	}
}
