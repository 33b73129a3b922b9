// Command mcpserver is the test MCP server (package testkit/mcpserver) as
// a program of its own, serving on stdio: what a task's image carries to
// give its agent an MCP server (built static, CGO_ENABLED=0, so it runs in
// any Linux image).
package main

import (
	"os"

	"harness/testkit/mcpserver"
)

func main() { os.Exit(mcpserver.Main()) }
