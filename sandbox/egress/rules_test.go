package egress

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestParseAllow(t *testing.T) {
	rules, err := ParseAllow("API.Anthropic.com., 127.0.0.1:8123,[::1]:9000,::1,example.org:443,api.anthropic.com,::1:443")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rules {
		got = append(got, r.String())
	}
	want := []string{"api.anthropic.com", "127.0.0.1:8123", "[::1]:9000", "[::1]", "example.org:443", "[::1:443]"}
	if !slices.Equal(got, want) {
		t.Errorf("rules %v, want %v", got, want)
	}
}

func TestParseAllowNamesTheBadEntry(t *testing.T) {
	for spec, want := range map[string]string{
		"":              "allowlist is empty",
		"a.com,,b.com":  `entry 2 "": empty entry`,
		"a.com,b.com:0": `entry 2 "b.com:0": port "0"`,
		"a.com:http":    `entry 1 "a.com:http": port "http"`,
		"https://a.com": `entry 1 "https://a.com": want HOST or HOST:PORT`,
		"*.a.com":       `entry 1 "*.a.com"`,
		"a..com":        `host "a..com" is not a DNS name`,
		"-a.com":        `host "-a.com"`,
		"[a.com]:443":   `"a.com" in brackets is not an IPv6 address`,
		"a.com:1:2":     `entry 1 "a.com:1:2"`,
		"fe80::1%eth0":  `entry 1 "fe80::1%eth0"`,
		"ok.com," + strings.Repeat("a", 64) + ".com": `entry 2`,
	} {
		_, err := ParseAllow(spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseAllow(%q) = %v, want an error containing %q", spec, err, want)
		}
	}
}

func TestRuleAllows(t *testing.T) {
	rules, _ := ParseAllow("api.anthropic.com,127.0.0.1:8123,[::1]:9000")
	for _, tc := range []struct {
		host string
		port int
		want bool
	}{
		{"api.anthropic.com", 443, true},
		{"API.ANTHROPIC.COM.", 80, true},
		{"api.anthropic.com", 8443, false},
		{"x.api.anthropic.com", 443, false},
		{"anthropic.com", 443, false},
		{"127.0.0.1", 8123, true},
		{"127.0.0.1", 8124, false},
		{"::ffff:127.0.0.1", 8123, true},
		{"localhost", 8123, false},
		{"[::1]", 9000, true},
		{"::1", 9000, true},
		{"::1", 9001, false},
		{"2130706433", 8123, false},
		{"", 443, false},
	} {
		if got := Allowed(rules, tc.host, tc.port); got != tc.want {
			t.Errorf("Allowed(%q, %d) = %v, want %v", tc.host, tc.port, got, tc.want)
		}
	}
}

func TestDefaultRules(t *testing.T) {
	str := func(rules []Rule) string {
		var s []string
		for _, r := range rules {
			s = append(s, r.String())
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct {
		name string
		env  []string
		argv []string
		want string
	}{
		{"claude", []string{"PATH=/bin", "ANTHROPIC_BASE_URL=http://127.0.0.1:8123", "ANTHROPIC_API_KEY=dummy"}, []string{"claude"}, "127.0.0.1:8123"},
		{"gemini", []string{"GOOGLE_GEMINI_BASE_URL=https://gw.example.com/v1beta"}, nil, "gw.example.com:443"},
		{"plain http", []string{"OPENAI_BASE_URL=http://Proxy.Local/v1"}, nil, "proxy.local:80"},
		{"codex -c", nil, []string{"codex-acp", "-c", "model_provider=fake",
			`model_providers.fake={name="fake", base_url="http://127.0.0.1:9001/v1", env_key="K", wire_api="responses"}`}, "127.0.0.1:9001"},
		{"codex unquoted", nil, []string{"codex", "-c", "chatgpt_base_url=https://chat.example.com/backend-api/"}, "chat.example.com:443"},
		{"several, repeated", []string{"ANTHROPIC_BASE_URL=http://[::1]:7000", "OPENAI_BASE_URL=http://[::1]:7000/v1", "GEMINI_BASE_URL=http://127.0.0.1:7001"}, nil, "[::1]:7000,127.0.0.1:7001"},
		{"none set", []string{"ANTHROPIC_BASE_URL=", "OPENAI_BASE_URL=not a url"}, []string{"claude"},
			"api.anthropic.com:443,api.openai.com:443,chatgpt.com:443,auth.openai.com:443,generativelanguage.googleapis.com:443,cloudcode-pa.googleapis.com:443,oauth2.googleapis.com:443"},
	} {
		if got := str(DefaultRules(tc.env, tc.argv)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestPlan checks the sandbox's side of an allowlist against a golden
// file: the proxy's address, the forwards and the hosts file.
func TestPlan(t *testing.T) {
	rules, err := ParseAllow("api.anthropic.com,127.0.0.2:8080,127.0.0.1:3128,localhost:9000,oauth2.googleapis.com:443,[::1]:7000,api.anthropic.com:8443")
	if err != nil {
		t.Fatal(err)
	}
	proxy, forwards, hosts := plan(rules)
	var b strings.Builder
	b.WriteString("proxy " + proxy + "\n")
	for _, f := range forwards {
		b.WriteString("forward " + f.Listen + " -> " + f.Target + "\n")
	}
	b.WriteString("hosts:\n" + hosts)
	golden := filepath.Join("testdata", "plan.golden")
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("plan:\n%s\nwant (%s):\n%s", b.String(), golden, want)
	}
}

// TestWithAddsRules: a proxy made With a task's hosts allows them besides
// the run's, each rule once, and leaves the run's proxy as it was.
func TestWithAddsRules(t *testing.T) {
	run, err := ParseAllow("api.anthropic.com:443")
	if err != nil {
		t.Fatal(err)
	}
	extra, err := ParseAllow("pypi.org,api.anthropic.com:443,127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(run, "")
	p.MaxConns = 7
	q := p.With(extra)
	var got []string
	for _, r := range q.Rules() {
		got = append(got, r.String())
	}
	if strings.Join(got, ",") != "api.anthropic.com:443,pypi.org,127.0.0.1:8080" {
		t.Errorf("rules %q", got)
	}
	if len(p.Rules()) != 1 || q.MaxConns != 7 {
		t.Errorf("run's rules %v, the task's proxy's MaxConns %d", p.Rules(), q.MaxConns)
	}
	if !Allowed(q.Rules(), "pypi.org", 443) || Allowed(p.Rules(), "pypi.org", 443) {
		t.Error("pypi.org:443: want allowed by the task's proxy only")
	}
}

// Only gives a proxy set up as the run's whose allowlist is the given
// rules alone (each once): a task verifier's, without the model's hosts.
func TestOnlyReplacesRules(t *testing.T) {
	run, err := ParseAllow("api.anthropic.com:443")
	if err != nil {
		t.Fatal(err)
	}
	task, err := ParseAllow("pypi.org:443,pypi.org:443,127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(run, "")
	p.MaxConns = 7
	q := p.Only(task)
	var got []string
	for _, r := range q.Rules() {
		got = append(got, r.String())
	}
	if strings.Join(got, ",") != "pypi.org:443,127.0.0.1:8080" || q.MaxConns != 7 {
		t.Errorf("rules %q, MaxConns %d", got, q.MaxConns)
	}
	if Allowed(q.Rules(), "api.anthropic.com", 443) || !Allowed(p.Rules(), "api.anthropic.com", 443) {
		t.Error("api.anthropic.com:443: want allowed by the run's proxy only")
	}
}
