// Package harbor reads task directories in the format of Harbor, the
// framework that runs Terminal-Bench 2.0 and the other datasets of its
// registry (task.toml, instruction.md, environment/, tests/, solution/),
// and runs their verifiers in a trial's image layer.
package harbor

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"go.yaml.in/yaml/v3"
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

// Task is one Harbor task directory.
type Task struct {
	// Dir is the task's directory; Name its base name.
	Dir, Name string
	// Instruction is instruction.md: the prompt.
	Instruction string
	// Image is what the trial runs in: the environment directory (a
	// build context), the build context a single-service compose file
	// names, or docker_image.
	Image string
	// Config is task.toml.
	Config Config
	// Unhonoured lists the task.toml keys that are read but not acted on
	// (gpus > 0, MCP servers, keys this version does not know), as
	// dotted paths with their line.
	Unhonoured []string
}

// Config is what task.toml sets.
type Config struct {
	Version         string
	Metadata        map[string]any
	AgentTimeout    time.Duration
	VerifierTimeout time.Duration
	BuildTimeout    time.Duration
	CPUs            float64
	MemoryMB        int64
	StorageMB       int64
	GPUs            int64
	AllowInternet   bool
	// Workdir overrides the image's WORKDIR when set.
	Workdir     string
	DockerImage string
	VerifierEnv map[string]string
	SolutionEnv map[string]string
	AgentEnv    map[string]string
}

// TestsDir is the directory copied to /tests for the verifier.
func (t *Task) TestsDir() string { return filepath.Join(t.Dir, "tests") }

// SolutionDir holds solve.sh, the reference solution.
func (t *Task) SolutionDir() string { return filepath.Join(t.Dir, "solution") }

// IsTask says whether dir is a task directory (it has task.toml).
func IsTask(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, "task.toml"))
	return err == nil && fi.Mode().IsRegular()
}

// LoadDataset reads dir as one task (it has task.toml) or as a dataset:
// its subdirectories that have task.toml, by name. Every task's errors are
// reported together.
func LoadDataset(dir string) ([]*Task, error) {
	if IsTask(dir) {
		t, err := Load(dir)
		if err != nil {
			return nil, err
		}
		return []*Task{t}, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", dir, err)
	}
	var tasks []*Task
	var errs []error
	for _, e := range entries {
		sub := filepath.Join(dir, e.Name())
		if !e.IsDir() || !IsTask(sub) {
			continue
		}
		t, err := Load(sub)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		tasks = append(tasks, t)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("dataset %s: no task directories (a task has task.toml)", dir)
	}
	return tasks, nil
}

// Load reads one task directory.
func Load(dir string) (*Task, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	t := &Task{Dir: abs, Name: filepath.Base(abs)}
	tomlPath := filepath.Join(abs, "task.toml")
	src, err := os.ReadFile(tomlPath)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", dir, err)
	}
	if err := t.parseConfig(tomlPath, string(src)); err != nil {
		return nil, err
	}
	instr, err := os.ReadFile(filepath.Join(abs, "instruction.md"))
	if err != nil {
		return nil, fmt.Errorf("task %s: instruction.md: %w", dir, err)
	}
	t.Instruction = string(instr)
	if strings.TrimSpace(t.Instruction) == "" {
		return nil, fmt.Errorf("task %s: instruction.md is empty", dir)
	}
	if fi, err := os.Stat(filepath.Join(t.TestsDir(), "test.sh")); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("task %s: tests/test.sh is missing", dir)
	}
	if err := t.findImage(); err != nil {
		return nil, err
	}
	return t, nil
}

// findImage picks the environment: environment/Dockerfile, a compose file
// with one service, or docker_image.
func (t *Task) findImage() error {
	env := filepath.Join(t.Dir, "environment")
	for _, name := range []string{"docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml"} {
		p := filepath.Join(env, name)
		if _, err := os.Stat(p); err == nil {
			img, err := composeImage(p)
			if err != nil {
				return fmt.Errorf("task %s: %w", t.Dir, err)
			}
			t.Image = img
			return nil
		}
	}
	for _, name := range []string{"Dockerfile", "Containerfile"} {
		if _, err := os.Stat(filepath.Join(env, name)); err == nil {
			t.Image = env
			return nil
		}
	}
	if t.Config.DockerImage != "" {
		t.Image = t.Config.DockerImage
		return nil
	}
	return fmt.Errorf("task %s: no environment/Dockerfile and no docker_image in task.toml", t.Dir)
}

// composeImage reads a compose file: one service is the environment (its
// build context or image); more services cannot be run here.
func composeImage(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	var c struct {
		Services map[string]struct {
			Image string `yaml:"image"`
			Build any    `yaml:"build"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	if len(c.Services) != 1 {
		var names []string
		for n := range c.Services {
			names = append(names, n)
		}
		sort.Strings(names)
		return "", fmt.Errorf("%s: %d services (%s): only a single-service environment can run here (no container network between services); run this task with Harbor and Docker", file, len(names), strings.Join(names, ", "))
	}
	for name, s := range c.Services {
		dir := filepath.Dir(file)
		switch b := s.Build.(type) {
		case string:
			return filepath.Join(dir, b), nil
		case map[string]any:
			ctx, _ := b["context"].(string)
			if ctx == "" {
				ctx = "."
			}
			p := filepath.Join(dir, ctx)
			if df, ok := b["dockerfile"].(string); ok && df != "" {
				return filepath.Join(p, df), nil
			}
			return p, nil
		}
		if s.Image != "" {
			return s.Image, nil
		}
		return "", fmt.Errorf("%s: service %s has neither build nor image", file, name)
	}
	return "", nil
}

// fieldError is a task.toml error naming the file, line and field.
func fieldError(file string, line int, field, format string, args ...any) error {
	loc := file
	if line > 0 {
		loc = fmt.Sprintf("%s:%d", file, line)
	}
	return fmt.Errorf("%s: %s: %s", loc, field, fmt.Sprintf(format, args...))
}

// honoured are the task.toml keys acted on ("metadata" is free-form).
var honoured = map[string]bool{
	"version": true, "metadata": true,
	"verifier.timeout_sec": true, "verifier.env": true,
	"agent.timeout_sec": true, "agent.env": true,
	"environment.build_timeout_sec": true, "environment.cpus": true,
	"environment.memory_mb": true, "environment.memory": true,
	"environment.storage_mb": true, "environment.storage": true,
	"environment.gpus": true, "environment.allow_internet": true,
	"environment.workdir": true, "environment.docker_image": true, "docker_image": true,
	"solution.env": true,
}

func (t *Task) parseConfig(file, src string) error {
	var raw map[string]any
	md, err := toml.Decode(src, &raw)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			key := pe.LastKey
			if key == "" {
				key = "syntax"
			}
			return fieldError(file, pe.Position.Line, key, "%s", pe.Message)
		}
		return fmt.Errorf("%s: %w", file, err)
	}
	lines := keyLines(src)
	c := Config{
		AgentTimeout: DefaultAgentTimeout, VerifierTimeout: DefaultVerifierTimeout, BuildTimeout: DefaultBuildTimeout,
		CPUs: DefaultCPUs, MemoryMB: DefaultMemoryMB, StorageMB: DefaultStorageMB, AllowInternet: true,
	}
	r := reader{file: file, lines: lines}
	c.Version = r.str(raw, "version")
	if m, ok := raw["metadata"].(map[string]any); ok {
		c.Metadata = m
	} else if _, has := raw["metadata"]; has {
		return r.errf("metadata", "must be a table")
	}
	c.VerifierTimeout = r.seconds(raw, "verifier.timeout_sec", c.VerifierTimeout)
	c.AgentTimeout = r.seconds(raw, "agent.timeout_sec", c.AgentTimeout)
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
	c.Workdir = r.str(raw, "environment.workdir")
	if c.Workdir != "" && !strings.HasPrefix(c.Workdir, "/") {
		r.fail("environment.workdir", "must be an absolute path, not %q", c.Workdir)
	}
	c.DockerImage = r.str(raw, "environment.docker_image")
	if c.DockerImage == "" {
		c.DockerImage = r.str(raw, "docker_image")
	}
	c.VerifierEnv = r.env(raw, "verifier.env")
	c.SolutionEnv = r.env(raw, "solution.env")
	c.AgentEnv = r.env(raw, "agent.env")
	if r.err != nil {
		return r.err
	}
	t.Config = c
	// Keys read but not acted on, each listed once.
	seen := map[string]bool{}
	for _, k := range md.Keys() {
		key := k.String()
		if strings.HasPrefix(key, "metadata.") || honoured[key] || seen[key] {
			continue
		}
		if isPrefixOfHonoured(key) || underHonouredTable(key) || underSeen(seen, key) {
			continue
		}
		seen[key] = true
		t.Unhonoured = append(t.Unhonoured, fmt.Sprintf("%s (line %d)", key, lineOf(lines, key)))
	}
	if c.GPUs > 0 {
		t.Unhonoured = append(t.Unhonoured, fmt.Sprintf("environment.gpus = %d (line %d): no GPUs are given to trials", c.GPUs, lineOf(lines, "environment.gpus")))
	}
	return nil
}

// underSeen says whether a table holding key is listed already.
func underSeen(seen map[string]bool, key string) bool {
	for i := strings.IndexByte(key, '.'); i >= 0; i = nextDot(key, i) {
		if seen[key[:i]] {
			return true
		}
	}
	return false
}

func nextDot(s string, i int) int {
	j := strings.IndexByte(s[i+1:], '.')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// isPrefixOfHonoured says whether key is a table holding honoured keys
// ("verifier", "environment").
func isPrefixOfHonoured(key string) bool {
	for h := range honoured {
		if strings.HasPrefix(h, key+".") {
			return true
		}
	}
	return false
}

// underHonouredTable says whether key lies inside an honoured table value
// (the variables of verifier.env).
func underHonouredTable(key string) bool {
	for _, t := range []string{"verifier.env.", "solution.env.", "agent.env."} {
		if strings.HasPrefix(key, t) {
			return true
		}
	}
	return false
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

func (r *reader) env(raw map[string]any, field string) map[string]string {
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
	for k, val := range m {
		switch x := val.(type) {
		case string:
			out[k] = x
		case int64, float64, bool:
			out[k] = fmt.Sprint(x)
		default:
			r.fail(field+"."+k, "must be a string, not %v", val)
		}
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
			name := strings.Trim(trimmed, "[] \t")
			if j := strings.IndexByte(name, ']'); j >= 0 {
				name = name[:j]
			}
			table = normalizeKey(name)
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

func normalizeKey(k string) string {
	parts := strings.Split(k, ".")
	for i, p := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(p), `"'`)
	}
	return strings.Join(parts, ".")
}

// lineOf is the line of key, or of its nearest table.
func lineOf(lines map[string]int, key string) int {
	for k := key; k != ""; {
		if l, ok := lines[k]; ok {
			return l
		}
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return 0
}
