package capture

import (
	"strings"
	"testing"

	"harness/schemas"
)

// A session mode is set with session/set_mode after each session/new (its
// current_mode_update on the record), on the agent's first case and on
// those prepared ahead alike; a session already in it gets no request.
func TestSessionModeIsSetAfterSessionNew(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, "--modes", "ask,code")
	cfg.SessionMode = "code"
	recs := run(t, cfg, cases("echo one", "echo two", "echo three"))
	for i, rec := range recs {
		if rec.Error != nil {
			t.Fatalf("case %d: error %+v", i, rec.Error)
		}
		modes := stepsOf(rec, schemas.StepMode)
		if len(modes) != 1 || !strings.Contains(string(modes[0].Raw), `"currentModeId":"code"`) {
			t.Errorf("case %d: mode steps %+v, want one current_mode_update to code", i, modes)
		}
		if rec.Session == nil || rec.Session.ID == "" {
			t.Errorf("case %d: no session", i)
		}
	}

	cfg = testConfig(t, "--modes", "ask,code")
	cfg.SessionMode = "ask"
	rec := one(t, cfg, "echo one")
	if rec.Error != nil || len(stepsOf(rec, schemas.StepMode)) != 0 {
		t.Errorf("a session already in its mode: error %+v, mode steps %+v, want neither", rec.Error, stepsOf(rec, schemas.StepMode))
	}
}

// A mode the agent did not list fails the case before its prompt, naming
// the mode and those listed; it is a configuration error.
func TestSessionModeNotListedFailsTheCase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--modes", "ask,code"}, `session mode "yolo": the agent's session/new listed only ask, code`},
		{nil, `session mode "yolo": the agent's session/new listed no modes`},
	} {
		cfg := testConfig(t, tc.args...)
		cfg.SessionMode = "yolo"
		rec := one(t, cfg, "echo one")
		if rec.Error == nil || rec.Error.Class != schemas.ErrAgentStart || rec.Error.Message != tc.want || rec.Error.Owner != schemas.OwnerConfig {
			t.Errorf("%v: error %+v, want agent_start (config) %q", tc.args, rec.Error, tc.want)
		}
		if len(stepsOf(rec, schemas.StepMessage)) != 0 {
			t.Errorf("%v: the prompt ran: %+v", tc.args, rec.Trajectory)
		}
	}
}
