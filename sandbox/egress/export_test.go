package egress

// For the tests of package egress_test (which may import what imports
// egress, as the real-agent fixtures do).
var (
	RequireBwrap = requireBwrap
	SandboxArgs  = sandboxArgs
	Atoi         = atoi
)
