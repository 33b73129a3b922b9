package sandbox

import (
	"os"

	"harness/sandbox/egress"
)

// HelperMain runs the part of the sandbox that harness runs as a process
// of its own, when this process was started as one: the network bridge
// inside the sandbox. It reports whether it did, and the exit code. harness's main calls it first, and so does the TestMain of
// every test binary that stands in for harness.
func HelperMain() (code int, ok bool) {
	if len(os.Args) > 1 && os.Args[1] == egress.BridgeArg {
		return egress.BridgeMain(os.Args[2:]), true
	}
	return 0, false
}
