package schemas

import (
	"errors"
	"strings"
	"testing"
)

// A last line with no newline that is not whole JSON is torn (a writer
// stopped in the middle of it); a whole last line without a newline is a
// record, and a bad line anywhere else is not called torn.
func TestReadResultsTornLastLine(t *testing.T) {
	const rec = `{"id":"a","trial":1,"input":"x","output":"y","trajectory":[],"timing":{"start":1,"end":2},"toolErrors":false}`
	for _, tc := range []struct {
		name, file string
		torn       bool
		line       int
	}{
		{"whole, no newline", rec + "\n" + strings.Replace(rec, `"a"`, `"b"`, 1), false, 0},
		{"cut short", rec + "\n" + rec[:40], true, 2},
		{"cut short, then a newline", rec + "\n" + rec[:40] + "\n", false, 2},
		{"bad line before the last", rec[:40] + "\n" + rec + "\n", false, 1},
	} {
		n := 0
		_, err := ReadResults("r.jsonl", strings.NewReader(tc.file), func(ResultLine) error { n++; return nil })
		var ie *InputError
		switch {
		case tc.line == 0 && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.line == 0 && n != 2:
			t.Errorf("%s: read %d records, want 2", tc.name, n)
		case tc.line == 0:
		case !errors.As(err, &ie) || ie.Line != tc.line:
			t.Errorf("%s: error %v, want an input error on line %d", tc.name, err, tc.line)
		case tc.torn != strings.Contains(err.Error(), TornLine):
			t.Errorf("%s: torn = %v, want %v: %v", tc.name, !tc.torn, tc.torn, err)
		}
	}
}

// A record's duration is its trial's (timing.trial: the agent, a task's
// verification, the graders in its slot); the agent's part is
// timing.total. Records of older runs have the agent's part only.
func TestRecordDurationIsTheTrials(t *testing.T) {
	r := CaptureRecord{Timing: Timing{Start: 1000, End: 1147, Total: 147, Trial: 140_000}}
	if d, a := RecordDuration(&r), AgentDuration(&r); d != 140_000 || a != 147 {
		t.Errorf("duration %d, agent %d; want 140000 and 147", d, a)
	}
	if e := NewTrialEntry(r, ""); e.Duration != 140_000 {
		t.Errorf("trial entry duration %d, want 140000", e.Duration)
	}
	old := CaptureRecord{Timing: Timing{Start: 1000, End: 1147}}
	if d, a := RecordDuration(&old), AgentDuration(&old); d != 147 || a != 147 {
		t.Errorf("older record: duration %d, agent %d; want 147 and 147", d, a)
	}
}
