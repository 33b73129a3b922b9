package evaluation

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestJSONEvents follows a trials run through its JSON event stream: the
// plan first, a record_written per unit, the cases in file order, the
// summary, and the finish last, with secrets redacted.
func TestJSONEvents(t *testing.T) {
	dir := t.TempDir()
	cases := [][2]string{{"slow", "sleep 200"}, {"b-s3cret", "echo b"}}
	opts := trialsOf(options(t, dir, cases, 2, 2, func(id string, trial int) bool { return id == "b-s3cret" }), dir)
	var buf bytes.Buffer
	opts.Events = JSONEvents(&buf, func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("s3cret"), []byte("***")) })
	if _, err := Run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	var names, finished []string
	var last JSONEvent
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var e JSONEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		names = append(names, e.Event)
		if e.Event == "case_finished" {
			finished = append(finished, e.ID)
			if e.N == nil || *e.N != 2 {
				t.Errorf("case %s: n %v, want 2", e.ID, e.N)
			}
		}
		last = e
	}
	got := strings.Join(names, " ")
	if !strings.HasPrefix(got, "planned started ") || strings.Count(got, "record_written") != 4 || !strings.HasSuffix(got, "summary_written finished") {
		t.Errorf("events %s", got)
	}
	if strings.Join(finished, " ") != "slow b-***" {
		t.Errorf("cases finished %v, want slow b-***", finished)
	}
	if *last.Total != 4 || *last.Finished != 4 || last.Interrupted {
		t.Errorf("finished %+v", last)
	}
	if strings.Contains(buf.String(), "s3cret") {
		t.Error("a secret in the event stream")
	}
}
