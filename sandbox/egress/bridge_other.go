//go:build !linux

package egress

import (
	"fmt"
	"os"
)

// BridgeMain runs the bridge inside the sandbox; the sandbox is Linux
// only, so here it only says so.
func BridgeMain(args []string) int {
	fmt.Fprintln(os.Stderr, "harness sandbox bridge: only on Linux")
	return 125
}
