package acp

import (
	"strings"
	"testing"
)

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
