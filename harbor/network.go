package harbor

import (
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
