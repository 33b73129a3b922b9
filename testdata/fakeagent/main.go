// Command fakeagent is the scriptable ACP fixture agent used by the harness's
// tests. See package harness/internal/fakeagent for its flags and scenarios.
//
//	go build -o /tmp/fakeagent ./testdata/fakeagent
package main

import "harness/internal/fakeagent"

func main() { fakeagent.Run() }
