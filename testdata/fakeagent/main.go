// Command fakeagent is the scriptable ACP fixture agent used by the harness's
// tests. See package harness/testkit/fakeagent for its flags and scenarios.
//
//	go build -o /tmp/fakeagent ./testdata/fakeagent
package main

import "harness/testkit/fakeagent"

func main() { fakeagent.Run() }
