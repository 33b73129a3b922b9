package acp

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfinePath(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	os.MkdirAll(filepath.Join(root, "sub"), 0o755)
	os.WriteFile(filepath.Join(root, "sub", "f.txt"), nil, 0o644)
	os.Symlink(outside, filepath.Join(root, "out"))
	os.Symlink(filepath.Join(root, "sub"), filepath.Join(root, "in"))
	os.Symlink(filepath.Join(outside, "nothing"), filepath.Join(root, "dangling"))
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{filepath.Join(root, "sub", "f.txt"), true},
		{"sub/f.txt", true},
		{filepath.Join(root, "new", "deep", "file.txt"), true},
		{filepath.Join(root, "in", "f.txt"), true},
		{filepath.Join(root, "sub", "..", "sub", "f.txt"), true},
		{filepath.Join(root, "..", "x"), false},
		{"../x", false},
		{"/etc/passwd", false},
		{filepath.Join(outside, "x"), false},
		{filepath.Join(root, "out", "x"), false},
		{filepath.Join(root, "out"), false},
		{filepath.Join(root, "dangling"), false},
		{"", false},
	} {
		got, err := ConfinePath(root, tc.path)
		if tc.ok != (err == nil) {
			t.Errorf("ConfinePath(%q) = %q, %v; want ok=%v", tc.path, got, err, tc.ok)
		}
		if !tc.ok && tc.path != "" && !errors.Is(err, ErrOutsideWorkspace) && !strings.Contains(tc.path, "dangling") {
			t.Errorf("ConfinePath(%q): error %v is not ErrOutsideWorkspace", tc.path, err)
		}
	}
}

func TestPermissionDecideByKindNotPosition(t *testing.T) {
	opts := []PermissionOption{
		{OptionID: "never", Kind: PermRejectAlways},
		{OptionID: "always", Kind: PermAllowAlways},
		{OptionID: "no", Kind: PermRejectOnce},
		{OptionID: "once", Kind: PermAllowOnce},
	}
	for policy, want := range map[PermissionPolicy]string{PolicyAllow: "once", PolicyDeny: "no"} {
		out, why := policy.Decide(opts)
		if out.Outcome != "selected" || out.OptionID != want || why == "" {
			t.Errorf("%s: %+v (%s)", policy, out, why)
		}
	}
	if out, _ := PolicyAllow.Decide(opts[:2]); out.OptionID != "always" {
		t.Errorf("allow without allow_once: %+v", out)
	}
	if out, _ := PolicyAllow.Decide([]PermissionOption{{OptionID: "x", Kind: PermRejectOnce}}); out.Outcome != "cancelled" {
		t.Errorf("allow with only reject options must not invent an allow: %+v", out)
	}
	if out, _ := PolicyCancel.Decide(opts); out.Outcome != "cancelled" {
		t.Errorf("cancel: %+v", out)
	}
}

func TestTailKeepsTheEnd(t *testing.T) {
	tl := NewTail(8)
	tl.Write([]byte("0123456789"))
	tl.Write([]byte("ab"))
	if got := tl.String(); !strings.HasSuffix(got, "456789ab") || !strings.Contains(got, "4 earlier bytes dropped") {
		t.Errorf("tail = %q", got)
	}
}
