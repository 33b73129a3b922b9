package egress

import (
	"slices"
	"testing"
)

// TestCredentialFlag reads back what Credential.String writes, and the
// bridge's command line carries it before the command.
func TestCredentialFlag(t *testing.T) {
	for _, c := range []Credential{{UID: 1234, GID: 1234, Groups: []int{2345, 7}}, {UID: 1000, GID: 100}} {
		got, err := parseCredential(c.String())
		if err != nil || got.UID != c.UID || got.GID != c.GID || !slices.Equal(got.Groups, c.Groups) {
			t.Errorf("%s: %+v %v", c, got, err)
		}
	}
	for _, bad := range []string{"1234", "a:1", "1:2:x", "1:-2", "1:2:3:4"} {
		if _, err := parseCredential(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	s := &Session{BridgeArgs: []string{BridgeBinary, BridgeArg, "--socket", "s", "--http", "h", "--"}}
	argv := s.CommandAs(Credential{UID: 1234, GID: 1234, Groups: []int{2345}}, []string{"agent", "-x"})
	want := []string{BridgeBinary, BridgeArg, "--socket", "s", "--http", "h", "--user", "1234:1234:2345", "--", "agent", "-x"}
	if !slices.Equal(argv, want) {
		t.Errorf("argv %q", argv)
	}
	cfg, err := parseBridgeArgs(argv[2:])
	if err != nil || cfg.user == nil || cfg.user.UID != 1234 || !slices.Equal(cfg.agent, []string{"agent", "-x"}) {
		t.Errorf("parsed %+v %v", cfg, err)
	}
}
