package harbor

import (
	"slices"
	"strings"

	"harness/image"
	"harness/sandbox/egress"
	"harness/schemas"
)

// PhaseStep returns s with the network of a phase of the task (see
// Config.Network): unchanged for a phase with the internet; through a
// proxy set up as proxy whose allowlist is the phase's hosts alone, for a
// phase with an allowlist (onConn, when set, is told of each connection);
// loopback only for a phase without the network, or with an allowlist and
// no proxy.
func (t *Task) PhaseStep(s Step, phase string, proxy *egress.Proxy, onConn func(egress.Connection)) Step {
	internet, hosts := t.Config.Network(phase)
	switch {
	case internet:
	case len(hosts) == 0 || proxy == nil:
		s.NoNetwork = true
	case s.NoNetwork:
		// Asked for loopback only: it stays so.
	default:
		s.Egress, s.OnConn = proxy.Only(hosts), onConn
	}
	return s
}

// EgressBinds are the read-only binds an egress session needs inside a
// layer (its socket directory, hosts file and the bridge binary), read
// from the bubblewrap arguments it gives.
func EgressBinds(s *egress.Session) []image.Bind {
	var out []image.Bind
	a := s.BwrapArgs
	for i := 0; i+2 < len(a); i++ {
		if a[i] == "--ro-bind" {
			out = append(out, image.Bind{Src: a[i+1], Dst: a[i+2]})
			i += 2
		}
	}
	return out
}

// Connection is one connection a phase of a trial made through the
// egress proxy, for the record.
func Connection(phase string, c egress.Connection) schemas.Connection {
	allowed := c.Allowed
	return schemas.Connection{Phase: phase, Host: c.Host, Port: c.Port, Allowed: allowed, Error: c.Error,
		BytesOut: c.BytesOut, BytesIn: c.BytesIn, DurationMs: c.Duration.Milliseconds(), Open: c.Open}
}

// BridgeAs puts the egress bridge before argv. For a command whose user
// (user, else the image's USER) is not root, the bridge starts as root,
// where it can listen on the ports below 1024 and drop its capabilities,
// and becomes the command's user, groups included, before it runs the
// command; its HOME is its user's unless env sets one. It returns
// the command line, the environment and the user to start it as.
func BridgeAs(img *image.Image, user string, sess *egress.Session, argv, env []string) ([]string, []string, string, error) {
	spec := user
	if spec == "" {
		spec = img.Config.User
	}
	u, err := img.RunsAs(spec)
	if err != nil {
		return nil, nil, "", err
	}
	if u.UID == 0 && u.GID == 0 {
		return sess.Command(argv), env, user, nil
	}
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "HOME=") }) {
		env = append(env, "HOME="+u.Home)
	}
	return sess.CommandAs(egress.Credential{UID: u.UID, GID: u.GID, Groups: u.Groups}, argv), env, "0:0", nil
}
