package modelrecord

import (
	"strings"
	"testing"
)

// TestNormalize: what changes from run to run compares equal; what the
// agent asked does not.
func TestNormalize(t *testing.T) {
	a := `{"model":"m","metadata":{"user_id":"user_ab_session_1e420f6c-90e6-4666-b1e6-f4598fc993cf"},` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"Today is 2026-11-27 10:31:02Z, id 0123456789abcdef0123456789abcdef","cache_control":{"type":"ephemeral"}}]}]}`
	b := `{"messages":[{"content":[{"text":"Today is 2027-01-02 23:59:59Z, id fedcba9876543210fedcba9876543210","type":"text"}],"role":"user"}],` +
		`"metadata":{"user_id":"user_ab_session_00000000-1111-2222-3333-444444444444"},"model":"m"}`
	if na, nb := Normalize("POST", "/v1/messages", "", []byte(a)), Normalize("POST", "/v1/messages", "", []byte(b)); na != nb {
		t.Errorf("normalized forms differ:\n%s\n%s", na, nb)
	}
	c := strings.Replace(a, "Today is", "Tomorrow is", 1)
	if Normalize("POST", "/v1/messages", "", []byte(a)) == Normalize("POST", "/v1/messages", "", []byte(c)) {
		t.Error("an edited prompt normalizes to the same request")
	}
	if Normalize("POST", "/v1/messages", "", []byte(a)) == Normalize("POST", "/v1/complete", "", []byte(a)) {
		t.Error("another path normalizes to the same request")
	}
	if got := dropKey("alt=sse&key=AIza-secret"); got != "alt=sse" {
		t.Errorf("dropKey: %q", got)
	}
}
