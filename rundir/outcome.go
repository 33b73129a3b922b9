package rundir

import (
	"fmt"
	"strings"

	"harness/cost"
)

// OutcomeLine is a run's outcome in one line: each agent's pass rate and cost.
func (m *Manifest) OutcomeLine() string {
	var parts []string
	for _, a := range m.Agents {
		p := a.Name + " " + a.Status
		if a.PassRate != nil {
			p += fmt.Sprintf(" pass rate %.3f", *a.PassRate)
		}
		if a.Cost != nil {
			p += " (" + cost.Format(a.Cost) + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}
