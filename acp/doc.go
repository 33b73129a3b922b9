// Package acp is a client for the Agent Client Protocol, version 1: JSON-RPC
// 2.0 over newline-delimited JSON on an agent's stdin and stdout.
//
// It is written on github.com/sourcegraph/jsonrpc2 with a line stream of its
// own (stream.go) that keeps every raw line, records and skips junk instead
// of dropping the connection, and takes lines of any length up to
// MaxLineBytes. Notifications are handled on the read goroutine, so updates
// reach the Observer in wire order and all updates sent before a response
// have been delivered by the time the matching call returns. Requests from
// the agent (permission, fs, terminal) are recorded in order on arrival and
// answered on their own goroutines.
//
// The pieces:
//   - types.go, updates.go: the v1 message types; the 14 known
//     session/update variants decode into typed structs, any other stays raw.
//   - process.go: the agent process, in its own process group, stderr
//     drained into a bounded tail.
//   - client.go: initialize, authenticate, sessions, prompt turns, cancel.
//   - services.go: what the client offers the agent: the permission policy,
//     text files confined to the session's workspace, terminals.
package acp
