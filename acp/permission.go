package acp

import "fmt"

// PermissionPolicy decides permission requests without asking anyone.
type PermissionPolicy string

// The permission policies.
const (
	// PolicyAllow picks an allow option: allow_once, else allow_always.
	PolicyAllow PermissionPolicy = "allow"
	// PolicyDeny picks a reject option: reject_once, else reject_always.
	PolicyDeny PermissionPolicy = "deny"
	// PolicyCancel answers every request "cancelled".
	PolicyCancel PermissionPolicy = "cancel"
)

// ParsePermissionPolicy checks a --permission value.
func ParsePermissionPolicy(s string) (PermissionPolicy, error) {
	switch p := PermissionPolicy(s); p {
	case PolicyAllow, PolicyDeny, PolicyCancel:
		return p, nil
	}
	return "", fmt.Errorf("unknown permission policy %q (want allow, deny or cancel)", s)
}

// Decide picks an option by its kind, never by its position, and says why.
// When no option of a wanted kind is offered it answers "cancelled" rather
// than invent an option id.
func (p PermissionPolicy) Decide(options []PermissionOption) (PermissionOutcome, string) {
	var prefs []string
	switch p {
	case PolicyAllow:
		prefs = []string{PermAllowOnce, PermAllowAlways}
	case PolicyDeny:
		prefs = []string{PermRejectOnce, PermRejectAlways}
	default:
		return PermissionOutcome{Outcome: "cancelled"}, fmt.Sprintf("policy %s", p)
	}
	for _, kind := range prefs {
		for _, o := range options {
			if o.Kind == kind && o.OptionID != "" {
				return PermissionOutcome{Outcome: "selected", OptionID: o.OptionID},
					fmt.Sprintf("policy %s: chose the %s option", p, kind)
			}
		}
	}
	return PermissionOutcome{Outcome: "cancelled"},
		fmt.Sprintf("policy %s: no %s or %s option offered, answered cancelled", p, prefs[0], prefs[1])
}
