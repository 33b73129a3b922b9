package harbor

import (
	"strings"
	"testing"
	"time"
)

// [environment.healthcheck] is read with its defaults; a bad value names
// the file, line and field; a key the table does not have is named as
// not honoured, with the one meant.
func TestHealthcheckIsRead(t *testing.T) {
	task, err := Load(writeTask(t, `schema_version = "1.4"

[environment.healthcheck]
command = "curl -f localhost:8080"
interval_sec = 0.5
start_period_sec = 10
retrys = 4
`))
	if err != nil {
		t.Fatal(err)
	}
	want := Healthcheck{Command: "curl -f localhost:8080", Interval: 500 * time.Millisecond, Timeout: DefaultHealthTimeout,
		Retries: DefaultHealthRetries, StartPeriod: 10 * time.Second, StartInterval: DefaultHealthStartInterval,
		Field: "environment.healthcheck", Line: 3}
	if hc := task.Config.Healthcheck; hc == nil || *hc != want {
		t.Fatalf("healthcheck %+v", hc)
	}
	if len(task.Unhonoured) != 1 || task.Unhonoured[0].String() != "environment.healthcheck.retrys (line 7; did you mean environment.healthcheck.retries?)" {
		t.Fatalf("unhonoured %v", task.Unhonoured)
	}
	for _, tc := range []struct{ toml, want string }{
		{"[environment.healthcheck]\ninterval_sec = 1\n", "task.toml:2: environment.healthcheck.command: a healthcheck needs a command"},
		{"[environment.healthcheck]\ncommand = [\"true\"]\n", "task.toml:3: environment.healthcheck.command: must be a string (run with sh -c), not [true]"},
		{"[environment.healthcheck]\ncommand = \"true\"\nretries = 0\n", "task.toml:4: environment.healthcheck.retries: must be a whole number, 1 or more, not 0"},
		{"[environment.healthcheck]\ncommand = \"true\"\ntimeout_sec = 0\n", "task.toml:4: environment.healthcheck.timeout_sec: must be a number of seconds, more than 0, not 0"},
		{"[environment]\nhealthcheck = \"true\"\n", "task.toml:3: environment.healthcheck: must be a table"},
		{"[[steps]]\nname = \"a\"\n[steps.healthcheck]\ncommand = \"true\"\ninterval_sec = -1\n", "task.toml:2: steps[1].healthcheck.interval_sec: must be a number of seconds, 0 or more, not -1"},
	} {
		_, err := Load(writeTask(t, "version = \"1.0\"\n"+tc.toml))
		if err == nil || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant %q", tc.toml, err, tc.want)
		}
	}
}

// A healthcheck that never passed says which, how often it ran, how its
// last run ended and the last line it printed.
func TestHealthErrorMessage(t *testing.T) {
	hc := &Healthcheck{Field: "environment.healthcheck", Line: 9, Timeout: 2 * time.Second}
	e := &HealthError{Check: hc, Tries: 3, Last: Ran{ExitCode: 1, Output: "connecting\nrefused\n"}}
	if got := e.Error(); got != "the healthcheck (task.toml:9 environment.healthcheck) never passed: 3 tries, the last exited 1: refused" {
		t.Errorf("got %q", got)
	}
	e = &HealthError{Check: hc, Tries: 1, Last: Ran{ExitCode: -1, TimedOut: true}}
	if got := e.Error(); got != "the healthcheck (task.toml:9 environment.healthcheck) never passed: 1 try, the last did not finish within 2s" {
		t.Errorf("got %q", got)
	}
}
