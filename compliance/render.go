package compliance

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"harness/sandbox"
)

// Render is the report as harness check prints it: the checklist
// (WriteText), or with asJSON the report as indented JSON; sb, when set,
// says how the agent ran in its sandbox (a "sandbox" member in JSON).
func Render(rep *Report, sb *sandbox.Info, asJSON bool) ([]byte, error) {
	if asJSON {
		out, err := json.MarshalIndent(struct {
			*Report
			Sandbox *sandbox.Info `json:"sandbox,omitempty"`
		}{rep, sb}, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("check: encode report: %w", err)
		}
		return append(out, '\n'), nil
	}
	var b strings.Builder
	WriteText(&b, rep)
	if sb != nil {
		WriteSandbox(&b, sb)
	}
	return []byte(b.String()), nil
}

// WriteSandbox says how the agent ran in the sandbox: its network, what
// was hidden and bound back, and how each cap was enforced.
func WriteSandbox(w io.Writer, i *sandbox.Info) {
	fmt.Fprintf(w, "\nSandbox: %s %s\n", i.Backend, i.Version)
	switch i.Network {
	case "allow":
		fmt.Fprintf(w, "  network: only through harness's proxy, to %s\n", strings.Join(i.Allow, ", "))
	case "none":
		fmt.Fprintf(w, "  network: none (loopback only)\n")
	default:
		fmt.Fprintf(w, "  network: the host's, not isolated\n")
	}
	fmt.Fprintf(w, "  hidden (seen empty): %s\n", strings.Join(i.Hidden, " "))
	if len(i.Bound) > 0 {
		fmt.Fprintf(w, "  bound back read-only: %s\n", strings.Join(i.Bound, " "))
	}
	for _, c := range i.Caps {
		note := ""
		if c.Note != "" {
			note = "; " + c.Note
		}
		fmt.Fprintf(w, "  cap %s: %s (%s%s)\n", c.Cap, c.Value, c.How, note)
	}
}
