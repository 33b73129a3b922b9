package schemas

import (
	"encoding/json"
	"testing"
)

// FuzzParsePrompt parses arbitrary prompt lines: never a panic; a case
// that parses has an id and a turn, and survives a round trip.
func FuzzParsePrompt(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","input":"hi"}`,
		`{"id":"b","input":["one","two"],"timeout":"90s","metadata":{"category":"x"},"extra":[1]}`,
		`{"id":"c","input":"x","timeout":1500}`,
		`{"id":"","input":"x"}`, `{"input":"x"}`, `{"id":"d"}`, `not json`, `[]`, `null`,
		`{"id":"e","input":42}`, `{"id":"f","input":[],"timeout":-1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		c, err := ParsePrompt(line)
		if err != nil {
			if _, ok := err.(*InputError); !ok {
				t.Fatalf("error is %T, not *InputError: %v", err, err)
			}
			return
		}
		if c.ID == "" || len(c.Input.List) == 0 {
			t.Fatalf("accepted a case without id or input: %q", line)
		}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		c2, err := ParsePrompt(b)
		if err != nil || c2.ID != c.ID || len(c2.Input.List) != len(c.Input.List) {
			t.Fatalf("round trip of %q gave %q: %v", line, b, err)
		}
	})
}
