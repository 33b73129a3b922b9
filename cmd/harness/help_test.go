package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestHelpCoversOverview checks that every command the overview lists has
// help: "harness help NAME" succeeds and prints its usage line.
func TestHelpCoversOverview(t *testing.T) {
	var overview bytes.Buffer
	e := &env{stdout: &overview, stderr: &overview, getenv: func(string) string { return "" }}
	if code := runMain(context.Background(), e, []string{"help"}); code != exitOK {
		t.Fatalf("harness help: exit %d", code)
	}
	_, list, ok := strings.Cut(overview.String(), "\nCommands:\n")
	if !ok {
		t.Fatalf("no command list in the overview:\n%s", overview.String())
	}
	list, _, _ = strings.Cut(list, "\n\n")
	var names []string
	for line := range strings.SplitSeq(list, "\n") {
		if fields := strings.Fields(line); len(fields) > 0 {
			names = append(names, fields[0])
		}
	}
	if len(names) < 15 {
		t.Fatalf("the overview lists %d commands (%v), want every one, version included", len(names), names)
	}
	for _, name := range names {
		var out, errOut bytes.Buffer
		e := &env{stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }}
		if code := runMain(context.Background(), e, []string{"help", name}); code != exitOK {
			t.Errorf("harness help %s: exit %d: %s", name, code, errOut.String())
			continue
		}
		if !strings.HasPrefix(out.String(), "Usage: harness "+name) {
			t.Errorf("harness help %s: no usage line:\n%s", name, out.String())
		}
	}
}
