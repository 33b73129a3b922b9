package compliance

import (
	"fmt"
	"io"
	"strings"
)

// WriteText prints the report as a checklist: one line per check with its
// mark (✓ passed, ✗ failed, – skipped or worth a note), a reason for every
// failure and a hint where there is one, the agent's stderr tail, and the
// verdict.
func WriteText(w io.Writer, r *Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "harness check: %s\n", strings.Join(r.Agent, " "))
	if info := r.AgentInfo; info != nil {
		fmt.Fprintf(&b, "agent: %s %s", info.Name, info.Version)
		if r.ProtocolVersion != nil {
			fmt.Fprintf(&b, " (ACP %d)", *r.ProtocolVersion)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "%s %s", c.Status.Symbol(), c.Title)
		if c.Required {
			b.WriteString(" [required]")
		}
		if c.Detail != "" {
			fmt.Fprintf(&b, ": %s", c.Detail)
		}
		if c.DurationMs != nil && c.Status != Skip {
			fmt.Fprintf(&b, " (%d ms)", *c.DurationMs)
		}
		b.WriteString("\n")
		if c.Hint != "" && c.Status != Pass {
			fmt.Fprintf(&b, "    hint: %s\n", c.Hint)
		}
	}
	if s := strings.TrimRight(r.StderrTail, "\n "); strings.TrimSpace(s) != "" {
		lines := strings.Split(s, "\n")
		if len(lines) > 10 {
			lines = lines[len(lines)-10:]
		}
		b.WriteString("\nagent stderr (last lines):\n")
		for _, l := range lines {
			fmt.Fprintf(&b, "  | %s\n", l)
		}
	}
	b.WriteString("\n")
	failed := r.Failed()
	var req, adv []string
	for _, c := range failed {
		if c.Required {
			req = append(req, c.Title)
		} else {
			adv = append(adv, c.Title)
		}
	}
	switch {
	case !r.Usable && len(req) > 0:
		fmt.Fprintf(&b, "NOT USABLE: %s\n", strings.Join(req, "; "))
	case !r.Usable:
		b.WriteString("NOT USABLE: a required check did not run\n")
	case len(adv) > 0:
		fmt.Fprintf(&b, "USABLE, with %d advisory failure(s): %s\n", len(adv), strings.Join(adv, "; "))
	default:
		b.WriteString("USABLE: no check failed\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
