package graders

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"harness/internal/suggest"
	"harness/schemas"
)

// configKeys are the keys a grader config object may hold, by kind. Keys
// in common apply to every kind.
var (
	commonKeys    = []string{"type", "name", "description", "weight", "timeout", "threshold"}
	scriptKeys    = []string{"command", "script", "config", "target", "cwd"}
	judgeKeys     = []string{"prompt", "promptFile", "outputSchema", "model", "temperature", "maxTokens", "baseURL", "apiKeyEnv", "provider"}
	compositeKeys = []string{"graders", "weights"}
	pathKeys      = []string{"path"}
	keyAliases    = map[string]string{
		"output_schema": "outputSchema", "max_tokens": "maxTokens", "base_url": "baseURL",
		"baseUrl": "baseURL", "api_key_env": "apiKeyEnv", "prompt_file": "promptFile",
	}
)

// cfgCtx locates a config object for error messages and relative paths.
type cfgCtx struct {
	file string // as the user named it
	dir  string // the config file's directory
	path string // field path of the object within the file ("" at top)
	opts Options
	// doc is the file parsed with positions, when the config came from a
	// file (nil for a config object).
	doc *yaml.Node
}

// ConfigError is a problem in a grader config file; it names the file and
// the field.
type ConfigError struct {
	File  string
	Field string
	Msg   string
}

// Error says which file and field are wrong, and why.
func (e *ConfigError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("grader config %s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("grader config %s: field %q: %s", e.File, e.Field, e.Msg)
}

func (c cfgCtx) field(name string) string {
	if c.path == "" {
		return name
	}
	if name == "" {
		return c.path
	}
	return c.path + "." + name
}

func (c cfgCtx) errf(field, format string, args ...any) error {
	return &ConfigError{File: c.file, Field: c.field(field), Msg: fmt.Sprintf(format, args...)}
}

func (c cfgCtx) sub(path string) cfgCtx {
	c.path = path
	return c
}

// id is the grader name for provenance: kind:file, plus #name or #path for
// graders nested in a composite.
func (c cfgCtx) id(kind string, m map[string]any) string {
	s := kind + ":" + c.file
	if n, ok := m["name"].(string); ok && n != "" {
		return s + "#" + n
	}
	if c.path != "" {
		return s + "#" + c.path
	}
	return s
}

func (c cfgCtx) resolve(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.dir, p)
}

// loadConfigFile reads a JSON or YAML grader config.
func loadConfigFile(spec, path string, opts Options) (Grader, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("grader %s: %w", spec, err)
	}
	if err := opts.pins.add(path); err != nil {
		return nil, err
	}
	var v any
	if strings.EqualFold(filepath.Ext(path), ".json") {
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, &ConfigError{File: spec, Msg: "invalid JSON: " + jsonErrLine(b, err)}
		}
	} else {
		if err := yaml.Unmarshal(b, &v); err != nil {
			return nil, &ConfigError{File: spec, Msg: "invalid YAML: " + err.Error()}
		}
		v = normalizeYAML(v)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &ConfigError{File: spec, Msg: "must hold one object (a grader, or {graders: [...], weights: [...]})"}
	}
	dir := filepath.Dir(path)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) != nil {
		// JSON that YAML cannot read (rare): positions are not known.
		doc = yaml.Node{}
	}
	return buildConfig(m, cfgCtx{file: spec, dir: dir, opts: opts, doc: &doc})
}

// scriptAt is where the text of a string field of the config starts in
// its file (line 0 when that is not known: a config object, a folded
// block, or a quoted string spread over lines).
func (c cfgCtx) scriptAt(field string) scriptAt {
	at := scriptAt{file: c.file}
	n := nodeAt(c.doc, c.field(field))
	if n == nil || n.Kind != yaml.ScalarNode {
		return at
	}
	switch {
	case n.Style&yaml.LiteralStyle != 0:
		// A literal block: its text starts on the line after the
		// indicator, a line of text a line of the file.
		at.line = n.Line + 1
	case !strings.Contains(n.Value, "\n"):
		at.line = n.Line
	}
	return at
}

// nodeAt finds the node of a field path ("graders[1].script") in a parsed
// document, or nil.
func nodeAt(doc *yaml.Node, path string) *yaml.Node {
	if doc == nil || len(doc.Content) == 0 {
		return nil
	}
	n := doc.Content[0]
	for path != "" {
		var key string
		if strings.HasPrefix(path, "[") {
			end := strings.IndexByte(path, ']')
			i, err := strconv.Atoi(path[1:max(end, 1)])
			if end < 0 || err != nil || n.Kind != yaml.SequenceNode || i < 0 || i >= len(n.Content) {
				return nil
			}
			n, path = n.Content[i], strings.TrimPrefix(path[end+1:], ".")
			continue
		}
		end := strings.IndexAny(path, ".[")
		if end < 0 {
			end = len(path)
		}
		key, path = path[:end], strings.TrimPrefix(path[end:], ".")
		if n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

// FromConfig builds the grader a config object describes, as if it were
// read from file (which errors name); relative paths in it are resolved
// against dir.
func FromConfig(m map[string]any, file, dir string, opts Options) (Grader, error) {
	top := opts.startPins()
	g, err := buildConfig(normalizeYAML(m).(map[string]any), cfgCtx{file: file, dir: dir, opts: opts})
	if err != nil || !top {
		return g, err
	}
	return pin(note(g, opts.Warn), opts.pins), nil
}

// jsonErrLine turns a JSON syntax error offset into a line number.
func jsonErrLine(b []byte, err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line := 1 + bytes.Count(b[:min(int(se.Offset), len(b))], []byte("\n"))
		return fmt.Sprintf("line %d: %v", line, err)
	}
	return err.Error()
}

// normalizeYAML turns YAML-decoded values into JSON-shaped ones.
func normalizeYAML(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeYAML(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = normalizeYAML(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = normalizeYAML(e)
		}
		return x
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case uint64:
		return float64(x)
	}
	return v
}

// graderTypes are the grader types, as messages list them; graderAliases
// are the other names they take.
var (
	graderTypes   = []string{"llm-judge", "script", "tests", "assert", "composite", "cases", "file"}
	graderAliases = []string{"code", "code-grader", "code_judge", "llm_judge", "judge", "llm-grader", "exec", "executable", "js", "module"}
)

// unknownGraderType says what is wrong with a grader type that is none,
// and what was probably meant: another grader type, or an assertion
// (which goes in an assert grader).
func unknownGraderType(kind string) string {
	want := "want " + orList(graderTypes)
	if isAssertion(kind) {
		return fmt.Sprintf("%q is an assertion, not a grader type: give it to an assert grader, {type: assert, assert: [{type: %s, ...}]} (grader types: %s)", kind, kind, orList(graderTypes))
	}
	if s := suggest.Nearest(kind, append(slices.Clone(graderTypes), graderAliases...)); s != "" {
		return fmt.Sprintf("unknown grader type %q: did you mean %q? (%s)", kind, s, want)
	}
	if s := nearestAssertion(kind); s != "" {
		return fmt.Sprintf("unknown grader type %q: did you mean the assertion %q, in an assert grader: {type: assert, assert: [{type: %s, ...}]}? (%s)", kind, s, s, want)
	}
	return fmt.Sprintf("unknown grader type %q (%s)", kind, want)
}

// buildConfig builds the grader a config object describes.
func buildConfig(m map[string]any, c cfgCtx) (Grader, error) {
	for k, v := range m {
		if to, ok := keyAliases[k]; ok {
			if _, dup := m[to]; dup {
				return nil, c.errf(k, "duplicates %q", to)
			}
			m[to] = v
			delete(m, k)
		}
	}
	kind, err := c.str(m, "type")
	if err != nil {
		return nil, err
	}
	if kind == "" {
		switch {
		case m["cases"] != nil:
			kind = "cases"
		case m["graders"] != nil:
			kind = "composite"
		case m["report"] != nil:
			kind = "tests"
		case m["assert"] != nil:
			kind = "assert"
		case m["command"] != nil || m["script"] != nil:
			kind = "script"
		case m["prompt"] != nil || m["promptFile"] != nil:
			kind = "llm-judge"
		case m["path"] != nil:
			kind = "file"
		default:
			return nil, c.errf("type", "missing (want llm-judge, script, composite or file; or give graders, command, script, prompt or path)")
		}
	}
	var allowed []string
	switch kind {
	case "composite":
		allowed = compositeKeys
	case "cases":
		allowed = casesKeys
	case "script", "code", "code-grader", "code_judge":
		allowed = scriptKeys
	case "llm-judge", "llm_judge", "judge", "llm-grader":
		allowed = judgeKeys
	case "tests":
		allowed = testsKeys
	case "assert":
		allowed = assertKeys
	case "file", "exec", "executable", "js", "module":
		allowed = pathKeys
	default:
		return nil, c.errf("type", "%s", unknownGraderType(kind))
	}
	if err := c.checkKeys(m, allowed); err != nil {
		return nil, err
	}
	opts := c.opts
	if d, ok, err := c.duration(m, "timeout"); err != nil {
		return nil, err
	} else if ok {
		opts.Timeout = d
	}
	if t, ok, err := c.num(m, "threshold"); err != nil {
		return nil, err
	} else if ok {
		if t < 0 || t > 1 {
			return nil, c.errf("threshold", "must be between 0 and 1, got %v", t)
		}
		if opts.Threshold == nil {
			opts.Threshold = &t
		}
	}
	c.opts = opts
	switch kind {
	case "composite":
		return buildComposite(m, c)
	case "cases":
		return buildCases(m, c)
	case "llm-judge", "llm_judge", "judge", "llm-grader":
		return buildJudge(m, c)
	case "tests":
		return buildTests(m, c)
	case "assert":
		return buildAssert(m, c)
	case "file", "exec", "executable", "js", "module":
		p, err := c.str(m, "path")
		if err != nil {
			return nil, err
		}
		if p == "" {
			return nil, c.errf("path", "missing (the grader file to run)")
		}
		o := c.opts
		o.Dir = c.dir
		g, err := Load(p, o)
		if err != nil {
			return nil, c.errf("path", "%v", err)
		}
		return g, nil
	}
	return buildScript(m, c)
}

// command reads a grader's command: an array of strings, or a shell
// command string; the program is resolved against the config's directory.
func (c cfgCtx) command(m map[string]any) ([]string, error) {
	argv, err := c.rawCommand(m)
	if err != nil {
		return nil, err
	}
	resolved, err := resolveCommand(argv, c.dir)
	if err != nil {
		return nil, c.errf("command", "cannot run %q: %v", argv[0], err)
	}
	return resolved, nil
}

// rawCommand reads a grader's command as written.
func (c cfgCtx) rawCommand(m map[string]any) ([]string, error) {
	cmd, ok := m["command"]
	if !ok || cmd == nil {
		return nil, c.errf("command", "missing (the program to run, as [program, args...])")
	}
	var argv []string
	switch x := cmd.(type) {
	case string:
		argv = []string{"sh", "-c", x}
	case []any:
		for i, a := range x {
			s, ok := a.(string)
			if !ok {
				return nil, c.errf(fmt.Sprintf("command[%d]", i), "must be a string, got %s", typeName(a))
			}
			argv = append(argv, s)
		}
	default:
		return nil, c.errf("command", "must be an array of strings (or a shell command string), got %s", typeName(cmd))
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, c.errf("command", "is empty")
	}
	return argv, nil
}

func (c cfgCtx) checkKeys(m map[string]any, allowed []string) error {
	var bad []string
	for k := range m {
		ok := false
		for _, a := range append(commonKeys, allowed...) {
			if k == a {
				ok = true
				break
			}
		}
		if !ok {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		all := append(append([]string(nil), commonKeys...), allowed...)
		return c.errf(bad[0], "unknown field for this grader type (known: %s)", strings.Join(all, ", "))
	}
	return nil
}

func (c cfgCtx) str(m map[string]any, k string) (string, error) {
	v, ok := m[k]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", c.errf(k, "must be a string, got %s", typeName(v))
	}
	return s, nil
}

func (c cfgCtx) num(m map[string]any, k string) (float64, bool, error) {
	v, ok := m[k]
	if !ok || v == nil {
		return 0, false, nil
	}
	f, ok := v.(float64)
	if !ok {
		return 0, false, c.errf(k, "must be a number, got %s", typeName(v))
	}
	return f, true, nil
}

func (c cfgCtx) duration(m map[string]any, k string) (time.Duration, bool, error) {
	v, ok := m[k]
	if !ok || v == nil {
		return 0, false, nil
	}
	var s string
	switch x := v.(type) {
	case float64:
		s = strconv.FormatFloat(x, 'f', -1, 64)
	case string:
		s = x
	default:
		return 0, false, c.errf(k, "must be a duration (\"30s\") or milliseconds, got %s", typeName(v))
	}
	d, err := schemas.ParseDuration(s)
	if err != nil {
		return 0, false, c.errf(k, "%v", err)
	}
	if d <= 0 {
		return 0, false, c.errf(k, "must be positive")
	}
	return d, true, nil
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// buildScript builds an agentv command grader or an RFT JavaScript grader.
func buildScript(m map[string]any, c cfgCtx) (Grader, error) {
	_, hasCmd := m["command"]
	src, hasSrc := m["script"]
	switch {
	case hasCmd && hasSrc:
		return nil, c.errf("script", "give either command (an external program) or script (JavaScript), not both")
	case hasSrc:
		for _, k := range []string{"target", "config", "cwd"} {
			if _, ok := m[k]; ok {
				return nil, c.errf(k, "only applies to command graders")
			}
		}
		s, ok := src.(string)
		if !ok || strings.TrimSpace(s) == "" {
			return nil, c.errf("script", "must be JavaScript source text defining grade(input)")
		}
		g, err := newJSScript(c.id("js", m), c.file+"#"+c.field("script"), c.scriptAt("script"), s, c.opts.timeout(DefaultJSTimeout), c.opts.threshold())
		if err != nil {
			return nil, c.errf("script", "%v", err)
		}
		return g, nil
	case !hasCmd:
		return nil, c.errf("command", "missing (a script grader needs command: [program, args...] or script: JavaScript)")
	}
	if raw, err := c.rawCommand(m); err == nil {
		if file, ok := agentvVerifier(raw); ok {
			// agentv's Vitest adapter: run the verifier ourselves, agentv
			// or not.
			path := c.resolve(file)
			if _, err := os.Stat(path); err != nil {
				return nil, c.errf("command", "verifier %s: %v", file, err)
			}
			if err := c.opts.pins.add(path); err != nil {
				return nil, c.errf("command", "%v", err)
			}
			return newVitestVerifier(c.id("vitest", m), path, c.opts), nil
		}
	}
	resolved, err := c.command(m)
	if err != nil {
		return nil, err
	}
	dir := c.dir
	if cwd, err := c.str(m, "cwd"); err != nil {
		return nil, err
	} else if cwd != "" {
		dir = c.resolve(cwd)
	}
	// The program resolves against the config's directory, arguments
	// against the directory the command runs in.
	raw, _ := c.rawCommand(m)
	if strings.Contains(raw[0], "/") {
		if err := c.opts.pins.add(resolved[0]); err != nil {
			return nil, c.errf("command", "%v", err)
		}
	}
	if err := c.opts.pins.addArgv(append([]string{"program"}, raw[1:]...), dir); err != nil {
		return nil, c.errf("command", "%v", err)
	}
	s := &script{
		name:      c.id("script", m),
		argv:      resolved,
		dir:       dir,
		timeout:   c.opts.timeout(DefaultTimeout),
		threshold: c.opts.threshold(),
		config:    m["config"],
		opts:      c.opts,
	}
	if t, ok := m["target"]; ok && t != nil {
		tc, err := parseTarget(t, c.sub(c.field("target")))
		if err != nil {
			return nil, err
		}
		s.target = tc
		s.stripEnv = []string{tc.judge.keyEnv, "OPENAI_API_KEY", "ANTHROPIC_API_KEY"}
	}
	return s, nil
}

// buildComposite builds {graders: [...], weights: [...]}.
func buildComposite(m map[string]any, c cfgCtx) (Grader, error) {
	list, ok := m["graders"].([]any)
	if !ok {
		return nil, c.errf("graders", "must be an array of graders, got %s", typeName(m["graders"]))
	}
	if len(list) == 0 {
		return nil, c.errf("graders", "is empty")
	}
	comp := &composite{name: c.id("composite", m), threshold: c.opts.threshold()}
	perGrader := 0
	for i, e := range list {
		sub := c.sub(c.field(fmt.Sprintf("graders[%d]", i)))
		var g Grader
		var err error
		w := math.NaN()
		switch x := e.(type) {
		case string:
			o := c.opts
			o.Dir = c.dir
			o.Threshold = nil
			g, err = Load(x, o)
			if err != nil {
				err = sub.errf("", "%v", err)
			}
		case map[string]any:
			if wf, ok, werr := sub.num(x, "weight"); werr != nil {
				return nil, werr
			} else if ok {
				w = wf
				perGrader++
			}
			// A composite's threshold is its own; sub-graders keep theirs.
			subCtx := sub
			subCtx.opts.Threshold = nil
			g, err = buildConfig(x, subCtx)
		default:
			err = sub.errf("", "must be a grader object or a path, got %s", typeName(e))
		}
		if err != nil {
			return nil, err
		}
		comp.graders = append(comp.graders, g)
		comp.weights = append(comp.weights, w)
	}
	if raw, ok := m["weights"]; ok && raw != nil {
		if perGrader > 0 {
			return nil, c.errf("weights", "give either weights or a weight on each grader, not both")
		}
		ws, ok := raw.([]any)
		if !ok {
			return nil, c.errf("weights", "must be an array of numbers, got %s", typeName(raw))
		}
		if len(ws) != len(list) {
			return nil, c.errf("weights", "has %d entries for %d graders", len(ws), len(list))
		}
		for i, w := range ws {
			f, ok := w.(float64)
			if !ok {
				return nil, c.errf(fmt.Sprintf("weights[%d]", i), "must be a number, got %s", typeName(w))
			}
			comp.weights[i] = f
		}
	} else if perGrader == 0 {
		for i := range comp.weights {
			comp.weights[i] = 1 / float64(len(list))
		}
	} else if perGrader != len(list) {
		for i, w := range comp.weights {
			if math.IsNaN(w) {
				return nil, c.errf(fmt.Sprintf("graders[%d].weight", i), "missing (when one grader has a weight, all need one)")
			}
		}
	}
	sum := 0.0
	for i, w := range comp.weights {
		if w < 0 || w > 1 {
			f := fmt.Sprintf("weights[%d]", i)
			if perGrader > 0 {
				f = fmt.Sprintf("graders[%d].weight", i)
			}
			return nil, c.errf(f, "must be between 0 and 1, got %v", w)
		}
		sum += w
	}
	if math.Abs(sum-1) > 1e-6 {
		f := "weights"
		if perGrader > 0 {
			f = "graders[*].weight"
		}
		return nil, c.errf(f, "must sum to 1, they sum to %v", strconv.FormatFloat(sum, 'g', 6, 64))
	}
	return comp, nil
}
