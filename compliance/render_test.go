package compliance

import (
	"encoding/json"
	"strings"
	"testing"

	"harness/sandbox"
)

func TestRender(t *testing.T) {
	rep := &Report{Agent: []string{"agent"}, Usable: true, Checks: []Check{{ID: CheckInitialize, Title: "initialize", Status: Pass, Required: true}}}
	sb := &sandbox.Info{Backend: "bwrap", Network: "allow", Allow: []string{"api.example.org:443"}, Hidden: []string{"/home"}}
	js, err := Render(rep, sb, true)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Usable  bool          `json:"usable"`
		Sandbox *sandbox.Info `json:"sandbox"`
	}
	if err := json.Unmarshal(js, &got); err != nil || !got.Usable || got.Sandbox == nil || got.Sandbox.Network != "allow" {
		t.Errorf("JSON %s (err %v): want the report with its sandbox", js, err)
	}
	if js, _ := Render(rep, nil, true); strings.Contains(string(js), `"sandbox"`) {
		t.Errorf("no sandbox, yet a sandbox member: %s", js)
	}
	text, err := Render(rep, sb, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"initialize", "Sandbox: bwrap", "network: only through harness's proxy, to api.example.org:443", "hidden (seen empty): /home"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
}
