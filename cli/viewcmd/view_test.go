package viewcmd

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"harness/cli"
)

// A port another program holds is an input error that says what to do.
func TestPortInUseSaysToGiveAnotherPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	var out, errb bytes.Buffer
	e := &cli.Env{Stdout: &out, Stderr: &errb}
	err = serveView(context.Background(), e, viewOptions{host: "127.0.0.1", port: portValue(port), seed: "1", poll: time.Second}, []string{t.TempDir()})
	if err == nil {
		t.Fatal("served on a port in use")
	}
	msg := err.Error()
	if cli.ExitCode(err) != cli.ExitUsage || !strings.Contains(msg, "address already in use") ||
		!strings.Contains(msg, "another program listens on port "+strconv.Itoa(port)+": give --port another port, or leave --port out for a free one") {
		t.Errorf("error %q (exit %d)", msg, cli.ExitCode(err))
	}
	if strings.Count(msg, "view:") > 0 {
		t.Errorf("the library's prefix doubles the command's: %q", msg)
	}
}

// An empty results file is served, and the command says it holds no
// trials yet.
func TestEmptyFileIsSaidToHoldNoTrials(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "empty.jsonl")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	e := &cli.Env{Stdout: &out, Stderr: &errb}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // serve nothing: stop as soon as it listens
	if err := serveView(ctx, e, viewOptions{host: "127.0.0.1", seed: "1", poll: time.Second}, []string{p}); err != nil {
		t.Fatal(err)
	}
	if want := "harness view: " + p + " is empty: it holds no trials yet (they show as they are written)\n"; errb.String() != want {
		t.Errorf("stderr %q, want %q", errb.String(), want)
	}
	if !strings.HasPrefix(out.String(), "harness view: http://127.0.0.1:") {
		t.Errorf("stdout %q", out.String())
	}
}
