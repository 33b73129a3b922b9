package egress

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// Rule allows connections to one host: a DNS name (compared without
// regard to case, exactly: no wildcards) or an IP address, on one port, or
// on ports 80 and 443 when Port is 0.
type Rule struct {
	// Host is a lower-case DNS name without a trailing dot, or an IP
	// address in its canonical form ("127.0.0.1", "::1").
	Host string
	// Port is the allowed port; 0 allows 80 and 443.
	Port int
}

// String gives the rule as ParseAllow reads it.
func (r Rule) String() string {
	if r.Port == 0 {
		if strings.Contains(r.Host, ":") {
			return "[" + r.Host + "]"
		}
		return r.Host
	}
	return net.JoinHostPort(r.Host, strconv.Itoa(r.Port))
}

// Ports lists the ports the rule allows.
func (r Rule) Ports() []int {
	if r.Port == 0 {
		return []int{80, 443}
	}
	return []int{r.Port}
}

// IsIP says whether the rule names an IP address rather than a name.
func (r Rule) IsIP() bool {
	_, err := netip.ParseAddr(r.Host)
	return err == nil
}

// Allows says whether the rule lets a connection to host:port through.
// host is normalised first (case, trailing dot, IPv6 brackets).
func (r Rule) Allows(host string, port int) bool {
	h, ok := normalizeHost(host)
	if !ok || h != r.Host {
		return false
	}
	for _, p := range r.Ports() {
		if p == port {
			return true
		}
	}
	return false
}

// Allowed says whether any of rules lets a connection to host:port through.
func Allowed(rules []Rule, host string, port int) bool {
	for _, r := range rules {
		if r.Allows(host, port) {
			return true
		}
	}
	return false
}

// hostLabel is one label of a DNS name as a rule may name it.
var hostLabel = regexp.MustCompile(`^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?$`)

// normalizeHost returns host in the form rules store it, and whether it is
// a valid name or address.
func normalizeHost(host string) (string, bool) {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return "", false
		}
		return a.Unmap().String(), true
	}
	if h != host {
		return "", false // brackets around something that is not an address
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "" || len(h) > 253 {
		return "", false
	}
	for _, label := range strings.Split(h, ".") {
		if len(label) > 63 || !hostLabel.MatchString(label) {
			return "", false
		}
	}
	return h, true
}

// ParseAllow reads an allowlist: comma-separated entries HOST or HOST:PORT
// (what follows "allow:" in --sandbox-network allow:...). HOST is a DNS
// name or an IP address (an IPv6 address with a port in brackets:
// "[::1]:8080"). An entry without a port allows 80 and 443. Errors name
// the entry.
func ParseAllow(spec string) ([]Rule, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, fmt.Errorf("allowlist is empty: name at least one HOST[:PORT] (or use the network mode none)")
	}
	var rules []Rule
	seen := map[Rule]bool{}
	for i, entry := range strings.Split(spec, ",") {
		r, err := parseEntry(strings.TrimSpace(entry))
		if err != nil {
			return nil, fmt.Errorf("allowlist entry %d %q: %w", i+1, entry, err)
		}
		if !seen[r] {
			seen[r] = true
			rules = append(rules, r)
		}
	}
	return rules, nil
}

func parseEntry(entry string) (Rule, error) {
	if entry == "" {
		return Rule{}, fmt.Errorf("empty entry")
	}
	if strings.ContainsAny(entry, "/*?@ ") {
		return Rule{}, fmt.Errorf("want HOST or HOST:PORT (a name, without scheme, path or wildcard, or an IP address)")
	}
	host, portText := entry, ""
	if a, err := netip.ParseAddr(entry); err == nil && a.Is6() {
		host = entry // a bare IPv6 address: no port
	} else if h, p, err := net.SplitHostPort(entry); err == nil {
		host, portText = h, p
		if strings.Contains(h, ":") && !strings.HasPrefix(entry, "[") {
			return Rule{}, fmt.Errorf("put an IPv6 address in brackets: [ADDR]:PORT")
		}
	} else if strings.Contains(entry, ":") && !strings.HasPrefix(entry, "[") {
		return Rule{}, fmt.Errorf("want HOST or HOST:PORT")
	}
	if strings.HasPrefix(entry, "[") {
		inner := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		if a, err := netip.ParseAddr(inner); err != nil || !a.Is6() {
			return Rule{}, fmt.Errorf("%q in brackets is not an IPv6 address", inner)
		}
		host = inner
	}
	h, ok := normalizeHost(host)
	if !ok {
		return Rule{}, fmt.Errorf("host %q is not a DNS name or an IP address", host)
	}
	r := Rule{Host: h}
	if portText != "" {
		p, err := strconv.Atoi(portText)
		if err != nil || p < 1 || p > 65535 {
			return Rule{}, fmt.Errorf("port %q is not a number from 1 to 65535", portText)
		}
		r.Port = p
	}
	return r, nil
}

// BaseURLVars are the environment variables through which the known agents
// take the address of their model API: Claude Code (Anthropic, and its
// Bedrock and Vertex gateways), Codex and other OpenAI clients, and Gemini
// CLI.
var BaseURLVars = []string{
	"ANTHROPIC_BASE_URL",
	"ANTHROPIC_BEDROCK_BASE_URL",
	"ANTHROPIC_VERTEX_BASE_URL",
	"OPENAI_BASE_URL",
	"OPENAI_API_BASE",
	"CODEX_API_BASE",
	"GOOGLE_GEMINI_BASE_URL",
	"GEMINI_BASE_URL",
	"GOOGLE_VERTEX_BASE_URL",
}

// KnownAPIHosts are the hosts the known agents use when no base URL
// variable points them elsewhere: the Anthropic API, the OpenAI API and
// ChatGPT (Codex signed in with ChatGPT, and its token refresh), Google's
// Generative Language API, Code Assist (Gemini CLI signed in with Google)
// and Google's OAuth token endpoint. Port 443 only.
var KnownAPIHosts = []string{
	"api.anthropic.com",
	"api.openai.com",
	"chatgpt.com",
	"auth.openai.com",
	"generativelanguage.googleapis.com",
	"cloudcode-pa.googleapis.com",
	"oauth2.googleapis.com",
}

// baseURLSetting finds base_url settings on an agent's command line, such
// as Codex's -c 'model_providers.x={base_url="http://127.0.0.1:8080/v1"}'
// or -c chatgpt_base_url=https://...
var baseURLSetting = regexp.MustCompile(`base_url\s*=\s*["']?([a-zA-Z][a-zA-Z0-9+.-]*://[^"'\s,}]+)`)

// DefaultRules is the allowlist when none is given: the hosts named by the
// agent's base-URL variables (BaseURLVars) in agentEnv and by base_url
// settings on its command line, each with the URL's port (or its scheme's:
// 80 for http, 443 for https); when there are none, KnownAPIHosts on 443.
func DefaultRules(agentEnv []string, agentArgv []string) []Rule {
	var urls []string
	vars := map[string]bool{}
	for _, v := range BaseURLVars {
		vars[v] = true
	}
	for _, kv := range agentEnv {
		k, v, _ := strings.Cut(kv, "=")
		if vars[k] && v != "" {
			urls = append(urls, v)
		}
	}
	for _, a := range agentArgv {
		for _, m := range baseURLSetting.FindAllStringSubmatch(a, -1) {
			urls = append(urls, m[1])
		}
	}
	var rules []Rule
	seen := map[Rule]bool{}
	for _, u := range urls {
		r, ok := ruleForURL(u)
		if ok && !seen[r] {
			seen[r] = true
			rules = append(rules, r)
		}
	}
	if len(rules) > 0 {
		return rules
	}
	for _, h := range KnownAPIHosts {
		rules = append(rules, Rule{Host: h, Port: 443})
	}
	return rules
}

// ruleForURL is the rule that lets a client reach u.
func ruleForURL(u string) (Rule, bool) {
	p, err := url.Parse(u)
	if err != nil || p.Hostname() == "" {
		return Rule{}, false
	}
	host, ok := normalizeHost(p.Hostname())
	if !ok {
		return Rule{}, false
	}
	port := 0
	switch {
	case p.Port() != "":
		port, err = strconv.Atoi(p.Port())
		if err != nil || port < 1 || port > 65535 {
			return Rule{}, false
		}
	case strings.EqualFold(p.Scheme, "http"), strings.EqualFold(p.Scheme, "ws"):
		port = 80
	case strings.EqualFold(p.Scheme, "https"), strings.EqualFold(p.Scheme, "wss"):
		port = 443
	default:
		return Rule{}, false
	}
	return Rule{Host: host, Port: port}, true
}
