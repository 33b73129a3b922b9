package acp

import (
	"context"
	"io"
	"syscall"
	"testing"
	"time"
)

// Closing the client kills the terminal commands of sessions still
// attached: no command outlives the agent that started it, whatever path
// ended the agent.
func TestCloseKillsAttachedTerminals(t *testing.T) {
	r, w := io.Pipe()
	defer w.Close()
	c := Connect(context.Background(), r, nopWriteCloser{io.Discard}, Options{})
	ts := newTerminals(TerminalOptions{Timeout: time.Minute}, t.TempDir())
	if _, rpcErr, note := ts.create(CreateTerminalRequest{Command: "sleep", Args: []string{"307.5"}}); rpcErr != nil {
		t.Fatalf("create: %v (%s)", rpcErr, note)
	}
	var pid int
	for _, term := range ts.all {
		pid = term.cmd.Process.Pid
	}
	c.mu.Lock()
	c.sessions["s"] = &session{id: "s", terms: ts}
	c.mu.Unlock()
	c.Close()
	for range 50 {
		if syscall.Kill(pid, 0) != nil {
			return // gone (and reaped)
		}
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(-pid, syscall.SIGKILL)
	t.Fatal("the terminal command outlived the closed client")
}
