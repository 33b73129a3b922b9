package harbor

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"harness/internal/suggest"
	"harness/sandbox/egress"
	"harness/schemas"
)

// Defaults of task.toml, as Harbor has them.
const (
	DefaultAgentTimeout    = 600 * time.Second
	DefaultVerifierTimeout = 600 * time.Second
	DefaultBuildTimeout    = 600 * time.Second
	DefaultCPUs            = 1
	DefaultMemoryMB        = 2048
	DefaultStorageMB       = 10240
)

// Config is what task.toml sets.
type Config struct {
	// SchemaVersion is schema_version (or its older spelling, version).
	SchemaVersion   string
	Metadata        map[string]any
	AgentTimeout    time.Duration
	VerifierTimeout time.Duration
	BuildTimeout    time.Duration
	CPUs            float64
	MemoryMB        int64
	StorageMB       int64
	GPUs            int64
	// AllowInternet is allow_internet, or network_mode = "public".
	AllowInternet bool
	// AllowedHosts are the hosts of network_mode = "allowlist"
	// (allowed_hosts, each HOST or HOST:PORT): the agent reaches them, and
	// its model's endpoints, through the egress allowlist, and solve.sh
	// and the verifier them alone (unless their own network_mode says
	// otherwise; see Network). Empty for any other mode.
	AllowedHosts []egress.Rule
	// AgentNetworkMode is [agent] network_mode ("" = the environment's),
	// AgentAllowedHosts its allowed_hosts when it is "allowlist".
	AgentNetworkMode  string
	AgentAllowedHosts []egress.Rule
	// VerifierNetworkMode is [verifier] network_mode ("" = the
	// environment's), VerifierAllowedHosts its allowed_hosts when it is
	// "allowlist".
	VerifierNetworkMode  string
	VerifierAllowedHosts []egress.Rule
	// AgentUser is [agent] user: who the agent, everything it starts and
	// solve.sh run as; VerifierUser is [verifier] user: who test.sh runs
	// as. Each unset (User "") means the image's USER.
	AgentUser, VerifierUser UserField
	// Workdir overrides the image's WORKDIR when set.
	Workdir     string
	DockerImage string
	// The env tables, their ${VAR} and ${VAR:-default} templates resolved
	// from the host's environment: [environment] env applies to every
	// command of a trial (the agent's, solve.sh, the verifier), the others
	// to theirs, over it.
	EnvironmentEnv map[string]string
	VerifierEnv    map[string]string
	SolutionEnv    map[string]string
	AgentEnv       map[string]string
	// SkillsDir is [environment] skills_dir: a directory of skills in the
	// image, copied into the agent's own skills directory before it
	// starts, for the agents whose layout is known ("" = none);
	// SkillsLine is its line.
	SkillsDir  string
	SkillsLine int
	// Healthcheck is [environment.healthcheck]: run in the trial's layer
	// before the agent starts (nil: none).
	Healthcheck *Healthcheck
	// MCPServers are [[environment.mcp_servers]]: given to the agent in
	// session/new.
	MCPServers []MCPServer
	// Artifacts are copied out of the trial's environment after it.
	Artifacts []Artifact
	// Steps are the [[steps]] of a multi-step task, in order (none for a
	// task of one instruction).
	Steps []StepConfig
	// RewardStrategy is multi_step_reward_strategy: how the steps'
	// rewards make the trial's (StrategyMean, the default, or
	// StrategyFinal).
	RewardStrategy string
	// SimulatedUser is [user], harness's own table: the task's simulated user
	// (nil: none), its paths resolved against the task directory.
	SimulatedUser *schemas.SimUser
}

// UserField is a user field of task.toml: who a command runs as in the
// trial's image.
type UserField struct {
	// User is a name of the image's /etc/passwd or a uid, either with
	// :group or :gid; "" for the image's USER.
	User string
	// Field is its dotted name (agent.user); Line where it is set.
	Field string
	Line  int
}

// Unhonoured is a task.toml field (or compose key) that is read but not
// acted on.
type Unhonoured struct {
	// Field is its dotted name (environment.healthcheck).
	Field string
	// Line is where it is set (0 when unknown).
	Line int
	// Suggest, for a key Harbor's schema does not have, is the key of
	// the schema it was probably meant to be ("" when none is near).
	Suggest string
}

func (u Unhonoured) String() string {
	var notes []string
	if u.Line != 0 {
		notes = append(notes, fmt.Sprintf("line %d", u.Line))
	}
	if u.Suggest != "" {
		notes = append(notes, "did you mean "+u.Suggest+"?")
	}
	if len(notes) == 0 {
		return u.Field
	}
	return fmt.Sprintf("%s (%s)", u.Field, strings.Join(notes, "; "))
}

// The task.toml fields of Harbor's schema (1.0 to 1.4) and how they are
// treated here (docs/tasks.md has the table, with the reasons).
var (
	// acted on, or informational (nothing to act on).
	honouredFields = map[string]bool{
		"version": true, "schema_version": true, "source": true,
		"verifier.timeout_sec": true, "agent.timeout_sec": true,
		"environment.build_timeout_sec": true, "environment.docker_image": true, "docker_image": true,
		"environment.cpus": true, "environment.memory_mb": true, "environment.memory": true,
		"environment.storage_mb": true, "environment.storage": true,
		"environment.allow_internet": true, "environment.workdir": true, "environment.os": true,
		"multi_step_reward_strategy": true, "environment.mcp_servers": true,
		"agent.user": true, "verifier.user": true, "environment.skills_dir": true,
		"environment.healthcheck": true, "environment.healthcheck.command": true, "environment.healthcheck.interval_sec": true,
		"environment.healthcheck.timeout_sec": true, "environment.healthcheck.start_period_sec": true,
		"environment.healthcheck.start_interval_sec": true, "environment.healthcheck.retries": true,
	}
	// tables whose content is free-form or all honoured.
	freeTables = []string{"metadata", "task", "verifier.env", "agent.env", "environment.env", "solution.env", "user"}
	// tables that only hold fields (checked one by one).
	containerTables = map[string]bool{"verifier": true, "agent": true, "environment": true, "solution": true}
	// in Harbor's schema, not acted on here (when set to a non-empty value).
	notHonouredFields = map[string]bool{
		"environment.gpu_types": true,
		"environment.tpu":       true,
		"agent.network_mode":    true, "agent.allowed_hosts": true,
		"verifier.environment": true, "verifier.collect": true,
		"multi_step_reward_mode": true,
	}
)

// specialFields are the fields of Harbor's schema read on their own.
var specialFields = []string{"steps", "artifacts", "environment.gpus", "environment.network_mode", "environment.allowed_hosts", "agent.network_mode", "agent.allowed_hosts", "verifier.network_mode", "verifier.allowed_hosts", "verifier.environment_mode"}

// schemaKeys are the keys of Harbor's schema, tables and fields, sorted:
// what a key it does not have may have been meant to be.
func schemaKeys() []string {
	var keys []string
	for k := range honouredFields {
		keys = append(keys, k)
	}
	for k := range notHonouredFields {
		keys = append(keys, k)
	}
	for k := range containerTables {
		keys = append(keys, k)
	}
	keys = append(keys, freeTables...)
	keys = append(keys, specialFields...)
	sort.Strings(keys)
	return keys
}

// inSchema says whether key is a key of Harbor's schema or inside one of
// its free-form tables.
func inSchema(key string) bool {
	return honouredFields[key] || notHonouredFields[key] || containerTables[key] ||
		slices.Contains(specialFields, key) || under(key, freeTables...)
}

// misspeltTable refuses a top-level table Harbor's schema does not have
// whose name is near one of its tables and that holds that table's
// fields ([enviroment] with docker_image): everything in it would be
// ignored, and the task would run without what it asks for.
func (r *reader) misspeltTable(raw map[string]any) error {
	var tables []string
	for k := range containerTables {
		tables = append(tables, k)
	}
	tables = append(tables, "metadata", "task", "solution")
	sort.Strings(tables)
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		sub, ok := raw[name].(map[string]any)
		if !ok || inSchema(name) {
			continue
		}
		best := suggest.Nearest(name, tables)
		if best == "" {
			continue
		}
		var held []string
		for _, k := range slices.Sorted(maps.Keys(sub)) {
			if inSchema(best + "." + k) {
				held = append(held, k)
			}
		}
		if len(held) > 0 {
			return r.errf(name, "not a task.toml table: did you mean [%s]? It holds %s, which [%s] sets and [%s] leaves unread",
				best, strings.Join(held, ", "), best, name)
		}
	}
	return nil
}

// parseConfig reads task.toml; lookup finds the host's variables the env
// tables name.
func (t *Task) parseConfig(file, src string, lookup func(string) (string, bool)) error {
	var raw map[string]any
	md, err := toml.Decode(src, &raw)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return syntaxError(file, src, pe)
		}
		return fmt.Errorf("%s: %w", file, err)
	}
	lines := keyLines(src)
	if err := (&reader{file: file, lines: lines}).misspeltTable(raw); err != nil {
		return err
	}
	c := Config{
		AgentTimeout: DefaultAgentTimeout, VerifierTimeout: DefaultVerifierTimeout, BuildTimeout: DefaultBuildTimeout,
		CPUs: DefaultCPUs, MemoryMB: DefaultMemoryMB, StorageMB: DefaultStorageMB, AllowInternet: true,
	}
	r := reader{file: file, lines: lines}
	c.SchemaVersion = r.str(raw, "schema_version")
	if c.SchemaVersion == "" {
		c.SchemaVersion = r.str(raw, "version")
	}
	if m, ok := raw["metadata"].(map[string]any); ok {
		c.Metadata = m
	} else if _, has := raw["metadata"]; has {
		return r.errf("metadata", "must be a table")
	}
	c.VerifierTimeout = r.seconds(raw, "verifier.timeout_sec", c.VerifierTimeout)
	c.AgentTimeout = r.seconds(raw, "agent.timeout_sec", c.AgentTimeout)
	c.Steps = r.steps(raw, src, c.AgentTimeout, c.VerifierTimeout)
	c.MCPServers = r.mcpServers(raw, src)
	c.Artifacts = r.artifacts(raw)
	c.SimulatedUser = r.simUser(raw, t.Dir, len(c.Steps) > 0)
	switch c.RewardStrategy = r.str(raw, "multi_step_reward_strategy"); c.RewardStrategy {
	case "":
		c.RewardStrategy = StrategyMean
	case StrategyMean, StrategyFinal:
	default:
		r.fail("multi_step_reward_strategy", "must be mean or final, not %q", c.RewardStrategy)
	}
	c.BuildTimeout = r.seconds(raw, "environment.build_timeout_sec", c.BuildTimeout)
	if v, ok := r.get(raw, "environment.cpus"); ok {
		c.CPUs = r.number(v, "environment.cpus", true)
	}
	c.MemoryMB = r.size(raw, "environment", "memory", c.MemoryMB)
	c.StorageMB = r.size(raw, "environment", "storage", c.StorageMB)
	if v, ok := r.get(raw, "environment.gpus"); ok {
		c.GPUs = int64(r.number(v, "environment.gpus", false))
	}
	if v, ok := r.get(raw, "environment.allow_internet"); ok {
		b, isBool := v.(bool)
		if !isBool {
			r.fail("environment.allow_internet", "must be true or false, not %v", v)
		}
		c.AllowInternet = b
	}
	// network_mode (schema 1.4) says what allow_internet said, and wins.
	var unhonoured []Unhonoured
	switch mode := r.str(raw, "environment.network_mode"); mode {
	case "":
	case "public":
		c.AllowInternet = true
	case "no-network":
		c.AllowInternet = false
	case "allowlist":
		c.AllowInternet = false
		c.AllowedHosts = r.allowedHosts(raw, "environment.allowed_hosts")
	default:
		r.fail("environment.network_mode", "must be public, no-network or allowlist, not %q", mode)
	}
	// The agent's and the verifier's own, each over the environment's.
	c.AgentNetworkMode, c.AgentAllowedHosts = r.phaseNetwork(raw, "agent")
	c.VerifierNetworkMode, c.VerifierAllowedHosts = r.phaseNetwork(raw, "verifier")
	switch osName := r.str(raw, "environment.os"); strings.ToLower(osName) {
	case "", "linux":
	default:
		r.fail("environment.os", "%q: only Linux images run here", osName)
	}
	if v, ok := r.get(raw, "environment.healthcheck"); ok {
		line := lineOf(lines, "environment.healthcheck")
		c.Healthcheck = readHealthcheck(v, "environment.healthcheck", line, func(key, format string, args ...any) {
			r.fail(strings.TrimSuffix("environment.healthcheck."+key, "."), format, args...)
		})
	}
	c.SkillsDir, c.SkillsLine = strings.TrimSpace(r.str(raw, "environment.skills_dir")), lineOf(lines, "environment.skills_dir")
	c.AgentUser = r.user(raw, "agent.user")
	c.VerifierUser = r.user(raw, "verifier.user")
	c.Workdir = r.str(raw, "environment.workdir")
	if c.Workdir != "" && !strings.HasPrefix(c.Workdir, "/") {
		r.fail("environment.workdir", "must be an absolute path, not %q", c.Workdir)
	}
	c.DockerImage = r.str(raw, "environment.docker_image")
	if c.DockerImage == "" {
		c.DockerImage = r.str(raw, "docker_image")
	}
	c.EnvironmentEnv = r.env(raw, "environment.env", lookup)
	c.VerifierEnv = r.env(raw, "verifier.env", lookup)
	c.SolutionEnv = r.env(raw, "solution.env", lookup)
	c.AgentEnv = r.env(raw, "agent.env", lookup)
	switch mode := r.str(raw, "verifier.environment_mode"); mode {
	case "", "shared":
	case "separate":
		unhonoured = append(unhonoured, Unhonoured{Field: "verifier.environment_mode", Line: lineOf(lines, "verifier.environment_mode")})
	default:
		r.fail("verifier.environment_mode", "must be shared or separate, not %q", mode)
	}
	if r.err != nil {
		return r.err
	}
	t.Config = c
	if c.GPUs > 0 {
		unhonoured = append(unhonoured, Unhonoured{Field: "environment.gpus", Line: lineOf(lines, "environment.gpus")})
	}
	t.Unhonoured = append(unreadKeys(md, raw, lines), unhonoured...)
	return nil
}

// unreadKeys lists the keys of task.toml that are not acted on: the fields
// of Harbor's schema not honoured here (set to something other than an
// empty list or table), and keys Harbor's schema does not have; each
// once, with its line.
func unreadKeys(md toml.MetaData, raw map[string]any, lines map[string]int) []Unhonoured {
	var out []Unhonoured
	seen := map[string]bool{}
	known := schemaKeys()
	for _, k := range md.Keys() {
		key := k.String()
		switch {
		case honouredFields[key], containerTables[key], slices.Contains(specialFields, key), honouredStepField(key),
			under(key, freeTables...), under(key, "environment.mcp_servers"), seen[key], underSeen(seen, key):
			continue
		}
		field := key
		for p := key; p != ""; p = parent(p) {
			if notHonouredFields[p] {
				field = p
				break
			}
		}
		if seen[field] {
			continue
		}
		seen[field] = true
		if v, ok := lookupKey(raw, field); ok && isEmpty(v) && notHonouredFields[field] {
			continue
		}
		u := Unhonoured{Field: field, Line: lineOf(lines, field)}
		if !inSchema(field) {
			u.Suggest = suggest.Nearest(field, known)
		}
		out = append(out, u)
	}
	return out
}

// under says whether key is one of tables or inside one.
func under(key string, tables ...string) bool {
	for _, t := range tables {
		if key == t || strings.HasPrefix(key, t+".") {
			return true
		}
	}
	return false
}

func parent(key string) string {
	i := strings.LastIndexByte(key, '.')
	if i < 0 {
		return ""
	}
	return key[:i]
}

// underSeen says whether a table holding key is listed already.
func underSeen(seen map[string]bool, key string) bool {
	for p := parent(key); p != ""; p = parent(p) {
		if seen[p] {
			return true
		}
	}
	return false
}

func lookupKey(raw map[string]any, dotted string) (any, bool) {
	var cur any = raw
	for _, p := range strings.Split(dotted, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// isEmpty says whether a value is an empty list or table.
func isEmpty(v any) bool {
	switch x := v.(type) {
	case []any:
		return len(x) == 0
	case []map[string]any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// syntaxError reports a TOML syntax error at the line of the character it
// is about, naming the key or table that line sets (or, inside a value
// that spans lines, the key whose value it is).
func syntaxError(file, src string, pe toml.ParseError) error {
	// The lexer counts a newline as soon as it reads it, so an error about
	// a newline (or found after one) carries the next line: the line is
	// the one holding the last character read.
	off := pe.Position.Start + pe.Position.Len - 1
	if off >= len(src) {
		off = len(src) - 1
	}
	line := 1
	if off > 0 {
		line = 1 + strings.Count(src[:off], "\n")
	}
	lines := keyLines(src)
	tables := tableLines(src)
	field, fieldLine := "", 0
	// A value left open on an earlier line (an array, an inline table):
	// the key it belongs to.
	for k := pe.LastKey; k != ""; k = parent(k) {
		if l, ok := lines[k]; ok {
			if !tables[k] && l < line {
				field, fieldLine = k, l
			}
			break
		}
	}
	if field == "" {
		field = fieldAtLine(src, line)
	}
	msg := pe.Message
	if fieldLine > 0 {
		msg += fmt.Sprintf(" (on line %d)", line)
		line = fieldLine
	}
	return fieldError(file, line, field, "%s", msg)
}

// fieldAtLine names what line n of a TOML document sets: a table header's
// table, or a key (within its table).
func fieldAtLine(src string, n int) string {
	table := ""
	all := strings.Split(src, "\n")
	for i, l := range all {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "[") {
			name := tableName(t)
			if i+1 == n {
				return "table " + name
			}
			table = name
			continue
		}
		if i+1 != n {
			continue
		}
		key := strings.TrimSpace(t)
		if j := strings.IndexAny(key, "= \t"); j >= 0 {
			key = key[:j]
		}
		key = normalizeKey(key)
		switch {
		case key == "" || strings.HasPrefix(key, "#"):
			if table == "" {
				return "syntax"
			}
			return "table " + table
		case table != "":
			return table + "." + key
		}
		return key
	}
	return "syntax"
}

// tableName reads a table header line ("[a.b]", "[[steps]]", or a
// malformed "[environment").
func tableName(header string) string {
	name := strings.TrimLeft(header, "[ \t")
	if j := strings.IndexAny(name, "]#"); j >= 0 {
		name = name[:j]
	}
	return normalizeKey(name)
}

// fieldError is a task.toml error naming the file, line and field.
func fieldError(file string, line int, field, format string, args ...any) error {
	loc := file
	if line > 0 {
		loc = fmt.Sprintf("%s:%d", file, line)
	}
	return fmt.Errorf("%s: %s: %s", loc, field, fmt.Sprintf(format, args...))
}

// reader reads typed fields of the decoded task.toml, keeping the first
// error (with the field's line).
type reader struct {
	file  string
	lines map[string]int
	err   error
}

func (r *reader) errf(field, format string, args ...any) error {
	return fieldError(r.file, lineOf(r.lines, field), field, format, args...)
}

func (r *reader) fail(field, format string, args ...any) {
	if r.err == nil {
		r.err = r.errf(field, format, args...)
	}
}

func (r *reader) get(raw map[string]any, dotted string) (any, bool) {
	parts := strings.Split(dotted, ".")
	var cur any = raw
	for i, p := range parts {
		m, ok := cur.(map[string]any)
		if !ok {
			if i > 0 {
				r.fail(strings.Join(parts[:i], "."), "must be a table")
			}
			return nil, false
		}
		cur, ok = m[p]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

// AgentNetwork is the agent's network: whether it has the internet and,
// when it does not, the hosts it reaches besides its model's endpoints:
// [agent] network_mode and allowed_hosts when set, else [environment]'s.
func (c Config) AgentNetwork() (internet bool, hosts []egress.Rule) {
	return c.phaseNetwork(c.AgentNetworkMode, c.AgentAllowedHosts)
}

// Phases of a trial whose commands each have a network: the agent's,
// solve.sh's (which stands for the agent), the verifier's, and a step's
// setup (its setup.sh and healthcheck: the environment's doing).
const (
	PhaseAgent    = "agent"
	PhaseSolution = "solution"
	PhaseVerifier = "verifier"
	PhaseSetup    = "setup"
)

// Network is the network of a phase's commands: whether they have the
// internet and, when they do not, the hosts they reach through the egress
// allowlist (none: loopback only). The agent and solve.sh, which stands
// for it as Harbor's oracle agent, have [agent] network_mode and
// allowed_hosts over [environment]'s; the verifier [verifier]'s over
// [environment]'s. (Harbor has no [solution] network_mode.)
func (c Config) Network(phase string) (internet bool, hosts []egress.Rule) {
	switch phase {
	case PhaseVerifier:
		return c.phaseNetwork(c.VerifierNetworkMode, c.VerifierAllowedHosts)
	case PhaseSetup:
		return c.phaseNetwork("", nil)
	}
	return c.AgentNetwork()
}

// phaseNetwork is a phase's network_mode (and allowed_hosts) over the
// environment's.
func (c Config) phaseNetwork(mode string, allowed []egress.Rule) (bool, []egress.Rule) {
	switch mode {
	case "public":
		return true, nil
	case "no-network":
		return false, nil
	case "allowlist":
		return false, allowed
	}
	return c.AllowInternet, c.AllowedHosts
}

// allowedHosts reads an allowlist's hosts: a list of HOST or HOST:PORT
// (a host without a port allows 80 and 443).
func (r *reader) allowedHosts(raw map[string]any, field string) []egress.Rule {
	v, ok := r.get(raw, field)
	if !ok {
		return nil
	}
	list, isList := v.([]any)
	if !isList {
		r.fail(field, "must be a list of hosts (HOST or HOST:PORT), not %v", v)
		return nil
	}
	var rules []egress.Rule
	for i, x := range list {
		h, isStr := x.(string)
		if !isStr {
			r.fail(field, "entry %d must be a string (HOST or HOST:PORT), not %v", i+1, x)
			return nil
		}
		got, err := egress.ParseAllow(h)
		if err == nil && strings.Contains(h, ",") {
			err = errors.New("one host per entry")
		}
		if err != nil {
			r.fail(field, "entry %d %q: %v", i+1, h, unwrapAllow(err))
			return nil
		}
		rules = append(rules, got...)
	}
	return rules
}

// unwrapAllow drops ParseAllow's own "allowlist entry N" prefix: the
// caller names the entry.
func unwrapAllow(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}

func (r *reader) str(raw map[string]any, field string) string {
	v, ok := r.get(raw, field)
	if !ok {
		return ""
	}
	s, isStr := v.(string)
	if !isStr {
		r.fail(field, "must be a string, not %v", v)
	}
	return s
}

// phaseNetwork reads a phase table's own network_mode ("" for the
// environment's) and, for an allowlist, its allowed_hosts.
func (r *reader) phaseNetwork(raw map[string]any, phase string) (mode string, hosts []egress.Rule) {
	switch mode = r.str(raw, phase+".network_mode"); mode {
	case "", "public", "no-network":
	case "allowlist":
		hosts = r.allowedHosts(raw, phase+".allowed_hosts")
	default:
		r.fail(phase+".network_mode", "must be public, no-network or allowlist, not %q", mode)
	}
	return mode, hosts
}

// user reads a user field: a name or uid[:group or gid] string, or a
// uid as a number.
func (r *reader) user(raw map[string]any, field string) UserField {
	u := UserField{Field: field, Line: lineOf(r.lines, field)}
	v, ok := r.get(raw, field)
	if !ok {
		return u
	}
	switch x := v.(type) {
	case string:
		u.User = strings.TrimSpace(x)
	case int64:
		if x < 0 {
			r.fail(field, "must be a user name or a uid, not %d", x)
		}
		u.User = strconv.FormatInt(x, 10)
	default:
		r.fail(field, "must be a user name or a uid, not %v", v)
	}
	return u
}

func (r *reader) number(v any, field string, fractional bool) float64 {
	var f float64
	switch n := v.(type) {
	case int64:
		f = float64(n)
	case float64:
		f = n
	default:
		r.fail(field, "must be a number, not %q", fmt.Sprint(v))
		return 0
	}
	if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		r.fail(field, "must be a positive number, not %v", v)
	}
	if !fractional && f != math.Trunc(f) {
		r.fail(field, "must be a whole number, not %v", v)
	}
	return f
}

func (r *reader) seconds(raw map[string]any, field string, def time.Duration) time.Duration {
	v, ok := r.get(raw, field)
	if !ok {
		return def
	}
	f := r.number(v, field, true)
	if f == 0 && r.err == nil {
		r.fail(field, "must be more than 0 seconds")
	}
	return time.Duration(f * float64(time.Second))
}

// size reads NAME_mb (a number of MB) or NAME (a string such as "2G",
// "512M" or a number of MB).
func (r *reader) size(raw map[string]any, table, name string, def int64) int64 {
	mbField := table + "." + name + "_mb"
	strField := table + "." + name
	if v, ok := r.get(raw, mbField); ok {
		return int64(r.number(v, mbField, false))
	}
	v, ok := r.get(raw, strField)
	if !ok {
		return def
	}
	switch s := v.(type) {
	case string:
		mb, err := parseSize(s)
		if err != nil {
			r.fail(strField, "%v", err)
		}
		return mb
	default:
		return int64(r.number(v, strField, false))
	}
}

var sizeRE = regexp.MustCompile(`^\s*([0-9]+(?:\.[0-9]+)?)\s*([kKmMgGtT]?)(i?[bB]?)\s*$`)

// parseSize reads "2G", "512M", "1.5GiB", "2048" (MB) as megabytes.
func parseSize(s string) (int64, error) {
	m := sizeRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a size such as 2G, 512M or 2048 (MB)", s)
	}
	n, _ := strconv.ParseFloat(m[1], 64)
	switch strings.ToUpper(m[2]) {
	case "K":
		n /= 1024
	case "G":
		n *= 1024
	case "T":
		n *= 1024 * 1024
	}
	return int64(math.Ceil(n)), nil
}

// envTemplate is a value that names a host variable, as Harbor reads it:
// the whole value is ${VAR} or ${VAR:-default}.
var envTemplate = regexp.MustCompile(`^\$\{([^}:]+)(?::-(.*))?\}$`)

// env reads an env table; a value that is ${VAR} or ${VAR:-default} is the
// host's VAR (set, even to ""), else the default; without a default an
// unset VAR is an error, as in Harbor.
func (r *reader) env(raw map[string]any, field string, lookup func(string) (string, bool)) map[string]string {
	v, ok := r.get(raw, field)
	if !ok {
		return nil
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		r.fail(field, "must be a table of variables, as in {NAME = \"value\"}")
		return nil
	}
	out := map[string]string{}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var s string
		switch x := m[k].(type) {
		case string:
			s = x
		case int64, float64, bool:
			s = fmt.Sprint(x)
		default:
			r.fail(field+"."+k, "must be a string, not %v", m[k])
			continue
		}
		if t := envTemplate.FindStringSubmatch(s); t != nil {
			val, set := lookup(t[1])
			switch {
			case set:
				s = val
			case strings.Contains(s, ":-"):
				s = t[2]
			default:
				r.fail(field+"."+k, "%s: %s is not set on this machine (set it, or give a default: ${%s:-value})", s, t[1], t[1])
				continue
			}
		}
		out[k] = s
	}
	return out
}

// keyLines maps the dotted keys of a TOML document to the lines that set
// them (tables to their header's line).
func keyLines(src string) map[string]int {
	lines := map[string]int{}
	table := ""
	keyRE := regexp.MustCompile(`^\s*([A-Za-z0-9_."' -]+?)\s*=`)
	for i, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "[") {
			table = tableName(trimmed)
			if _, ok := lines[table]; !ok {
				lines[table] = i + 1
			}
			continue
		}
		if m := keyRE.FindStringSubmatch(line); m != nil && !strings.HasPrefix(trimmed, "#") {
			key := normalizeKey(m[1])
			if table != "" {
				key = table + "." + key
			}
			if _, ok := lines[key]; !ok {
				lines[key] = i + 1
			}
		}
	}
	return lines
}

// tableLines says which names of a TOML document are tables (headers).
func tableLines(src string) map[string]bool {
	tables := map[string]bool{}
	for _, line := range strings.Split(src, "\n") {
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "[") {
			tables[tableName(t)] = true
		}
	}
	return tables
}

func normalizeKey(k string) string {
	parts := strings.Split(k, ".")
	for i, p := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(p), `"'`)
	}
	return strings.Join(parts, ".")
}

// lineOf is the line of key, or of its nearest table.
func lineOf(lines map[string]int, key string) int {
	for k := key; k != ""; k = parent(k) {
		if l, ok := lines[k]; ok {
			return l
		}
	}
	return 0
}
