// Package suite reads a suite file: one YAML or JSON document holding an
// eval's prompts (or agentv tests), the agents to compare, graders, k,
// prices, workspace, gates and run flags. agentv's eval YAML is accepted as
// it is written. Every error names the file, the line and the key, and a
// file's errors are reported together (up to MaxErrors).
package suite

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"harness/cost"
	"harness/internal/suggest"
	"harness/schemas"
)

// Suite is a parsed suite file.
type Suite struct {
	// File is the suite file as named; Dir its absolute directory, which
	// relative paths in it are resolved against.
	File, Dir string
	// Name names the suite (the "name" key, else the file's base name).
	Name string
	// Hash is the SHA-256 of the file's bytes, hex.
	Hash string
	// PromptsFile is the absolute path of a prompts JSONL file, when
	// "prompts" names one.
	PromptsFile string
	// Cases are the inline cases: "prompts" given as a list, and agentv
	// "tests".
	Cases []schemas.PromptCase
	// Asserts holds each case's own graders (agentv's assert lists), by
	// case id, as JSON values.
	Asserts map[string]any
	// Agents are the agents to run, in file order; empty means the agent
	// command after "--".
	Agents []Agent
	// Target is agentv's target: the agent to run (or the name of the
	// command after "--").
	Target string
	// Graders apply to every case: absolute paths of grader files, or
	// grader config objects (JSON values).
	Graders []any
	// Judge holds the judge model settings for rubric strings.
	Judge map[string]any
	// K is the number of trials per case (0: not set).
	K int
	// Prices maps a model name to its price.
	Prices cost.Table
	// Workspace is the workspace template and hooks.
	Workspace Workspace
	// Flags are the run flags the suite sets, with the gates as flags.
	Flags []Flag
	// Regression is the comparison gate (gates.baseline,
	// gates.max-regression, gates.significance): nil when the suite has
	// none.
	Regression *RegressionGate
	// CaseFields names the field of each inline case, by id
	// ("tests[2]", "prompts[0]"), for errors found after parsing.
	CaseFields map[string]string
	// Lines holds the line of every value under graders, judge and each
	// case's assert, by field path as errors name it
	// ("tests[0].assert[1].type"); see Line.
	Lines map[string]int
}

// Line returns the line of the suite that field (a path such as
// "tests[0].assert[1].type") is on, or that of the nearest value holding
// it the suite recorded; 0 when there is none.
func (s *Suite) Line(field string) int {
	for field != "" {
		if n, ok := s.Lines[field]; ok {
			return n
		}
		i := strings.LastIndexAny(field, ".[")
		if i < 0 {
			break
		}
		field = field[:i]
	}
	return 0
}

// Agent is one agent of the matrix.
type Agent struct {
	Name string
	// Line is the line of the agent's name in the suite (0 for the
	// command given after --).
	Line    int
	Command []string
	// Env holds KEY=VALUE pairs added to the agent's environment.
	Env []string
	// Sandbox and Adapter are --sandbox and --adapter for this agent.
	Sandbox, Adapter string
	// Model names the price row of the agent's tokens.
	Model string
	// Flags are run flags for this agent only.
	Flags []Flag
}

// RegressionGate is a suite's comparison gate: every other agent fails it
// when its mean pass rate is lower than the baseline's by more than
// MaxDrop and McNemar's exact test on the cases' outcomes gives a p-value
// below Alpha.
type RegressionGate struct {
	// Baseline names the suite's agent the others are compared with.
	Baseline string
	// MaxDrop is the largest drop of mean pass rate allowed (0..1).
	MaxDrop float64
	// Alpha is the significance level (default DefaultAlpha).
	Alpha float64
	// Line is the line of gates.baseline.
	Line int
}

// DefaultAlpha is the significance level of a comparison gate that does
// not set one.
const DefaultAlpha = 0.05

// Workspace is the workspace template of every case and its hooks.
type Workspace struct {
	// Template is the absolute path of the template directory.
	Template string
	// Setup runs in each fresh copy (agentv's before_each); Prepare once
	// per template (before_all).
	Setup, Prepare string
}

// Flag is one run flag the suite sets: its long name, its values (several
// for repeatable flags) and the line that set it.
type Flag struct {
	Name   string
	Values []string
	Line   int
	// Field is the key as the suite wrote it, with its path
	// ("concurrency", "agents.a.flags.timeout", "gates.min-pass-rate").
	Field string
}

// FlagCheck says what is wrong with a run flag the suite sets ("" when
// nothing is): the suite knows its own keys, the caller the run flags.
type FlagCheck func(f Flag) string

// Error is a problem in a suite file.
type Error = schemas.InputError

// MaxErrors is how many of a suite file's errors are reported; the rest
// are counted.
const MaxErrors = 20

// Errors are the problems of a suite file, in line order: the first
// MaxErrors, and how many more there are.
type Errors struct {
	List []*Error
	More int
}

// Error lists the problems, one a line.
func (e *Errors) Error() string {
	lines := make([]string, 0, len(e.List)+1)
	for _, x := range e.List {
		lines = append(lines, x.Error())
	}
	if e.More > 0 && len(e.List) > 0 {
		lines = append(lines, fmt.Sprintf("%s: and %d more errors", e.List[0].File, e.More))
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems, for errors.As.
func (e *Errors) Unwrap() []error {
	out := make([]error, len(e.List))
	for i, x := range e.List {
		out[i] = x
	}
	return out
}

// Load reads and checks a suite file; check, when not nil, checks the run
// flags it sets.
func Load(name string, check FlagCheck) (*Suite, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("suite %s: %w", name, err)
	}
	return Parse(name, b, check)
}

// Parse reads a suite from its bytes; name is the file's name, which
// relative paths are resolved against; check, when not nil, checks the
// run flags it sets. Every problem found is reported: one is an *Error,
// several an *Errors.
func Parse(name string, b []byte, check FlagCheck) (*Suite, error) {
	dir, err := filepath.Abs(filepath.Dir(name))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	s := &Suite{File: name, Dir: dir, Hash: hex.EncodeToString(sum[:]), Asserts: map[string]any{},
		CaseFields: map[string]string{}, Lines: map[string]int{}}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, &Error{File: name, Line: yamlErrLine(err), Msg: "not valid YAML or JSON: " + err.Error()}
	}
	if len(doc.Content) == 0 {
		return nil, &Error{File: name, Msg: "empty"}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, &Error{File: name, Line: root.Line, Msg: "must be a mapping of keys (prompts, tests, agents, graders, k...)"}
	}
	p := &parser{s: s}
	err = p.root(root)
	err = errors.Join(err, s.checkBaseline())
	if check != nil {
		err = errors.Join(err, checkFlags(s, check))
	}
	if err != nil {
		return nil, collect(name, err)
	}
	if s.Name == "" {
		s.Name = strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	}
	return s, nil
}

// yamlErrLine digs the line number out of a YAML syntax error.
func yamlErrLine(err error) int {
	msg := err.Error()
	if i := strings.Index(msg, "line "); i >= 0 {
		rest := msg[i+5:]
		j := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
		if j > 0 {
			n, _ := strconv.Atoi(rest[:j])
			return n
		}
	}
	return 0
}

type parser struct {
	s *Suite
}

// checkFlags checks every run flag the suite sets: its own, then each
// agent's.
func checkFlags(s *Suite, check FlagCheck) error {
	var errs []error
	flags := slices.Clone(s.Flags)
	for _, a := range s.Agents {
		flags = append(flags, a.Flags...)
	}
	for _, f := range flags {
		if msg := check(f); msg != "" {
			errs = append(errs, &Error{File: s.File, Line: f.Line, Field: f.Field, Msg: msg})
		}
	}
	return errors.Join(errs...)
}

// collect turns the errors the parser joined into the problems of the
// file: one *Error, or *Errors in line order, each once, up to MaxErrors.
func collect(file string, err error) error {
	var list []*Error
	seen := map[string]bool{}
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var ie *Error
		if !errors.As(err, &ie) {
			ie = &Error{File: file, Msg: err.Error()}
		}
		if k := ie.Error(); !seen[k] {
			seen[k] = true
			list = append(list, ie)
		}
	}
	walk(err)
	sort.SliceStable(list, func(i, j int) bool { return list[i].Line < list[j].Line })
	if len(list) == 1 {
		return list[0]
	}
	e := &Errors{List: list}
	if len(list) > MaxErrors {
		e.List, e.More = list[:MaxErrors], len(list)-MaxErrors
	}
	return e
}

// recordLines notes the line of n and of every value within it, under
// field and the paths below it; a key's line stands for its value's.
func (p *parser) recordLines(n *yaml.Node, field string, line int) {
	if _, ok := p.s.Lines[field]; !ok {
		p.s.Lines[field] = line
	}
	switch n.Kind {
	case yaml.MappingNode:
		pairs(n, func(k, v *yaml.Node) error {
			p.recordLines(v, field+"."+k.Value, k.Line)
			return nil
		})
	case yaml.SequenceNode:
		for i, item := range n.Content {
			p.recordLines(item, fmt.Sprintf("%s[%d]", field, i), item.Line)
		}
	case yaml.AliasNode:
		if n.Alias != nil {
			p.recordLines(n.Alias, field, line)
		}
	}
}

func (p *parser) errf(n *yaml.Node, field, format string, args ...any) error {
	return &Error{File: p.s.File, Line: n.Line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// canonical spells a key the way flags are spelled: kebab-case.
func canonical(key string) string {
	var b strings.Builder
	for i, r := range key {
		switch {
		case r == '_':
			b.WriteByte('-')
		case r >= 'A' && r <= 'Z':
			if i > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r + 'a' - 'A')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// meant is ": did you mean X?" for the key of known nearest to key, or "".
func meant(key string, known []string) string {
	if s := suggest.Nearest(key, known); s != "" {
		return fmt.Sprintf(": did you mean %s?", s)
	}
	return ""
}

// pairs walks a mapping node's keys and values, every one of them: the
// errors of all are returned, joined.
func pairs(n *yaml.Node, fn func(k, v *yaml.Node) error) error {
	var errs []error
	for i := 0; i+1 < len(n.Content); i += 2 {
		if err := fn(n.Content[i], n.Content[i+1]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RootKeys are the suite keys other than run flags.
var RootKeys = []string{"name", "description", "prompts", "tests", "agents", "target", "graders", "judge", "k", "prices", "workspace", "gates"}

func (p *parser) root(root *yaml.Node) error {
	seen := map[string]bool{}
	var tests, prompts *yaml.Node
	var errs []error
	err := pairs(root, func(k, v *yaml.Node) error {
		key := canonical(k.Value)
		if seen[key] {
			return p.errf(k, k.Value, "set twice")
		}
		seen[key] = true
		switch key {
		case "name":
			return p.str(v, k.Value, &p.s.Name)
		case "description":
			return nil
		case "prompts":
			prompts = v
			return nil
		case "tests":
			tests = v
			return nil
		case "agents":
			return p.agents(v)
		case "target":
			return p.str(v, k.Value, &p.s.Target)
		case "graders":
			return p.graders(v)
		case "judge":
			m, err := p.object(v, k.Value)
			p.s.Judge = m
			p.recordLines(v, "judge", k.Line)
			return err
		case "k":
			n, err := strconv.Atoi(v.Value)
			if v.Kind != yaml.ScalarNode || err != nil || n < 1 {
				return p.errf(v, "k", "must be a whole number of trials, at least 1")
			}
			p.s.K = n
			return nil
		case "prices":
			return p.prices(v)
		case "workspace":
			return p.workspace(v)
		case "gates":
			return p.gates(v)
		}
		f, err := p.flag(k, v, "")
		if err != nil {
			return err
		}
		p.s.Flags = append(p.s.Flags, f)
		return nil
	})
	errs = append(errs, err)
	if prompts != nil {
		errs = append(errs, p.prompts(prompts))
	}
	if tests != nil {
		errs = append(errs, p.tests(tests))
	}
	if prompts == nil && tests == nil {
		errs = append(errs, p.errf(root, "", "no cases: give prompts (a JSONL file or a list) or tests"))
	}
	if len(p.s.Asserts) > 0 && !seen["graders"] {
		for _, c := range p.s.Cases {
			if _, ok := p.s.Asserts[c.ID]; !ok {
				field := p.s.CaseFields[c.ID]
				errs = append(errs, &Error{File: p.s.File, Line: p.s.Line(field), Field: field, Msg: fmt.Sprintf("case %q has no assert and the suite has no graders: every case needs a grader once one has", c.ID)})
				break
			}
		}
	}
	return errors.Join(errs...)
}

func (p *parser) str(v *yaml.Node, field string, dst *string) error {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		return p.errf(v, field, "must be a string")
	}
	*dst = v.Value
	return nil
}

// value decodes a node into plain JSON values (maps, lists, strings,
// float64 numbers, bools).
func (p *parser) value(v *yaml.Node, field string) (any, error) {
	var x any
	if err := v.Decode(&x); err != nil {
		return nil, p.errf(v, field, "%v", err)
	}
	b, err := json.Marshal(normalize(x))
	if err != nil {
		return nil, p.errf(v, field, "%v", err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, p.errf(v, field, "%v", err)
	}
	return out, nil
}

// normalize makes YAML's map keys strings, so the value encodes as JSON.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = normalize(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
	}
	return v
}

func (p *parser) object(v *yaml.Node, field string) (map[string]any, error) {
	if v.Kind != yaml.MappingNode {
		return nil, p.errf(v, field, "must be a mapping")
	}
	x, err := p.value(v, field)
	if err != nil {
		return nil, err
	}
	return x.(map[string]any), nil
}

// path resolves a path of the suite against its directory.
func (p *parser) path(s string) string {
	if filepath.IsAbs(s) {
		return s
	}
	return filepath.Join(p.s.Dir, s)
}

func (p *parser) prompts(v *yaml.Node) error {
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Value == "" {
			return p.errf(v, "prompts", "must name a JSONL file or list the cases")
		}
		p.s.PromptsFile = p.path(v.Value)
		return nil
	case yaml.SequenceNode:
		var errs []error
		for i, item := range v.Content {
			errs = append(errs, p.testCase(item, fmt.Sprintf("prompts[%d]", i)))
		}
		return errors.Join(errs...)
	}
	return p.errf(v, "prompts", "must name a JSONL file or list the cases")
}

func (p *parser) tests(v *yaml.Node) error {
	if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
		return p.errf(v, "tests", "must be a non-empty list of tests ({id, input, assert})")
	}
	var errs []error
	for i, item := range v.Content {
		errs = append(errs, p.testCase(item, fmt.Sprintf("tests[%d]", i)))
	}
	return errors.Join(errs...)
}

// testKeys are the keys of a test (agentv) or inline prompt case.
var testKeys = []string{"id", "input", "expected", "expected-output", "criteria", "hint", "reference", "negative-reference", "metadata", "timeout", "workspace", "image", "user", "assert", "description"}

// testCase reads one test or inline prompt case.
func (p *parser) testCase(n *yaml.Node, field string) error {
	if n.Kind != yaml.MappingNode {
		return p.errf(n, field, "must be a mapping ({id, input, assert})")
	}
	obj := map[string]any{}
	var assert any
	err := pairs(n, func(k, v *yaml.Node) error {
		key := canonical(k.Value)
		if !slices.Contains(testKeys, key) {
			return p.errf(k, field+"."+k.Value, "unknown key%s (known: %s)", meant(key, testKeys), strings.Join(testKeys, ", "))
		}
		x, err := p.value(v, field+"."+k.Value)
		if err != nil {
			return err
		}
		switch key {
		case "assert":
			assert = x
			p.recordLines(v, field+".assert", k.Line)
			return nil
		case "input":
			turns, err := inputTurns(x)
			if err != nil {
				return p.errf(v, field+".input", "%v", err)
			}
			x = turns
		case "expected-output":
			s, err := messageText(x)
			if err != nil {
				return p.errf(v, field+"."+k.Value, "%v", err)
			}
			key, x = "expected", s
		case "criteria":
			key = "hint"
		case "negative-reference":
			key = "negativeReference"
		case "workspace":
			s, ok := x.(string)
			if !ok {
				return p.errf(v, field+".workspace", "must be a template directory")
			}
			x = p.path(s)
		case "image":
			s, ok := x.(string)
			if !ok || s == "" {
				return p.errf(v, field+".image", "must be an image reference (a directory, a tar, a Dockerfile context, a local image name)")
			}
			if strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") {
				s = p.path(s)
			}
			x = s
		case "description":
			return nil
		case "user":
			p.recordLines(v, field+".user", k.Line)
			b, _ := json.Marshal(x)
			u, err := schemas.ParseSimUser(b)
			if err != nil {
				var ie *schemas.InputError
				if errors.As(err, &ie) {
					return p.errf(v, field+"."+ie.Field, "%s", ie.Msg)
				}
				return p.errf(v, field+".user", "%v", err)
			}
			if len(u.Command) > 0 {
				if cmd := u.Command[0]; strings.HasPrefix(cmd, "./") || strings.HasPrefix(cmd, "../") {
					u.Command[0] = p.path(cmd)
					if !strings.ContainsRune(u.Command[0], '/') {
						u.Command[0] = "./" + u.Command[0]
					}
				}
			}
			if u.PromptFile != "" {
				u.PromptFile = p.path(u.PromptFile)
			}
			x = u
		}
		if _, dup := obj[key]; dup {
			return p.errf(k, field+"."+k.Value, "gives %s a second time", key)
		}
		obj[key] = x
		return nil
	})
	if err != nil {
		return err
	}
	b, _ := json.Marshal(obj)
	c, err := schemas.ParsePrompt(b)
	if err != nil {
		var ie *schemas.InputError
		if errors.As(err, &ie) {
			return p.errf(n, field+"."+ie.Field, "%s", ie.Msg)
		}
		return p.errf(n, field, "%v", err)
	}
	for _, have := range p.s.Cases {
		if have.ID == c.ID {
			return p.errf(n, field+".id", "duplicate id %q", c.ID)
		}
	}
	p.s.Cases = append(p.s.Cases, c)
	p.s.CaseFields[c.ID] = field
	p.s.Lines[field] = n.Line
	if assert != nil {
		p.s.Asserts[c.ID] = assert
	}
	return nil
}

// inputTurns reads an input: a string, a list of strings (turns), or
// agentv's message list, whose user messages are the turns.
func inputTurns(x any) (any, error) {
	list, ok := x.([]any)
	if !ok {
		if _, ok := x.(string); ok {
			return x, nil
		}
		return nil, fmt.Errorf("must be a string, a list of turns or a list of messages")
	}
	var turns []any
	for i, item := range list {
		switch m := item.(type) {
		case string:
			turns = append(turns, m)
		case map[string]any:
			role, _ := m["role"].(string)
			text, err := messageText(m["content"])
			if err != nil {
				return nil, fmt.Errorf("message %d: %v", i, err)
			}
			switch role {
			case "user":
				turns = append(turns, text)
			case "system", "assistant":
				return nil, fmt.Errorf("message %d: role %q: only user turns can be sent to an agent", i, role)
			default:
				return nil, fmt.Errorf("message %d: role must be user, got %q", i, role)
			}
		default:
			return nil, fmt.Errorf("item %d must be a string or a message {role, content}", i)
		}
	}
	if len(turns) == 1 {
		return turns[0], nil
	}
	return turns, nil
}

// messageText is the text of agentv message content: a string, a message
// list (the last one's), or content parts (their text joined).
func messageText(x any) (string, error) {
	switch v := x.(type) {
	case string:
		return v, nil
	case []any:
		var parts []string
		for _, item := range v {
			switch m := item.(type) {
			case string:
				parts = append(parts, m)
			case map[string]any:
				if c, ok := m["content"]; ok {
					s, err := messageText(c)
					if err != nil {
						return "", err
					}
					parts = []string{s}
					continue
				}
				if t, ok := m["text"].(string); ok {
					parts = append(parts, t)
				}
			}
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", fmt.Errorf("must be text or messages")
}

func (p *parser) graders(v *yaml.Node) error {
	items := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		items = v.Content
	}
	var errs []error
	for i, item := range items {
		field := fmt.Sprintf("graders[%d]", i)
		p.recordLines(item, field, item.Line)
		switch item.Kind {
		case yaml.ScalarNode:
			p.s.Graders = append(p.s.Graders, p.path(item.Value))
		case yaml.MappingNode:
			m, err := p.object(item, field)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			p.s.Graders = append(p.s.Graders, m)
		default:
			errs = append(errs, p.errf(item, field, "must be a grader file or a grader config object"))
		}
	}
	return errors.Join(errs...)
}

// agentKeys are the keys of one agent.
var agentKeys = []string{"command", "env", "sandbox", "adapter", "model", "flags"}

func (p *parser) agents(v *yaml.Node) error {
	if v.Kind != yaml.MappingNode || len(v.Content) == 0 {
		return p.errf(v, "agents", "must map agent names to commands")
	}
	return pairs(v, func(k, a *yaml.Node) error {
		field := "agents." + k.Value
		if k.Value == "" || strings.ContainsAny(k.Value, "/\\ ") {
			return p.errf(k, field, "an agent name must be a word (it names files)")
		}
		ag := Agent{Name: k.Value, Line: k.Line}
		var err error
		switch a.Kind {
		case yaml.ScalarNode, yaml.SequenceNode:
			ag.Command, err = p.command(a, field)
		case yaml.MappingNode:
			err = pairs(a, func(ak, av *yaml.Node) error {
				key := canonical(ak.Value)
				f := field + "." + ak.Value
				switch key {
				case "command":
					c, err := p.command(av, f)
					ag.Command = c
					return err
				case "env":
					return p.env(av, f, &ag.Env)
				case "sandbox":
					return p.str(av, f, &ag.Sandbox)
				case "adapter":
					return p.str(av, f, &ag.Adapter)
				case "model":
					return p.str(av, f, &ag.Model)
				case "flags":
					if av.Kind != yaml.MappingNode {
						return p.errf(av, f, "must map run flags to values")
					}
					return pairs(av, func(fk, fv *yaml.Node) error {
						fl, err := p.flag(fk, fv, f+".")
						ag.Flags = append(ag.Flags, fl)
						return err
					})
				}
				return p.errf(ak, f, "unknown key%s (known: %s)", meant(key, agentKeys), strings.Join(agentKeys, ", "))
			})
			if err == nil && len(ag.Command) == 0 {
				err = p.errf(a, field+".command", "missing")
			}
		default:
			err = p.errf(a, field, "must be a command, or {command, env, sandbox, adapter, model, flags}")
		}
		if err != nil {
			return err
		}
		p.s.Agents = append(p.s.Agents, ag)
		return nil
	})
}

// command reads a command: a list of words, or one string split as a
// shell splits words (quotes and backslashes; no expansion).
func (p *parser) command(v *yaml.Node, field string) ([]string, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		words, err := SplitWords(v.Value)
		if err != nil {
			return nil, p.errf(v, field, "%v", err)
		}
		if len(words) == 0 {
			return nil, p.errf(v, field, "empty command")
		}
		return words, nil
	case yaml.SequenceNode:
		var words []string
		for _, w := range v.Content {
			if w.Kind != yaml.ScalarNode {
				return nil, p.errf(w, field, "command words must be strings")
			}
			words = append(words, w.Value)
		}
		if len(words) == 0 {
			return nil, p.errf(v, field, "empty command")
		}
		return words, nil
	}
	return nil, p.errf(v, field, "must be a command string or a list of words")
}

func (p *parser) env(v *yaml.Node, field string, dst *[]string) error {
	switch v.Kind {
	case yaml.MappingNode:
		return pairs(v, func(k, val *yaml.Node) error {
			if val.Kind != yaml.ScalarNode {
				return p.errf(val, field+"."+k.Value, "must be a string")
			}
			*dst = append(*dst, k.Value+"="+val.Value)
			return nil
		})
	case yaml.SequenceNode:
		for _, e := range v.Content {
			if e.Kind != yaml.ScalarNode || !strings.Contains(e.Value, "=") {
				return p.errf(e, field, "must be KEY=VALUE")
			}
			*dst = append(*dst, e.Value)
		}
		return nil
	}
	return p.errf(v, field, "must map names to values, or list KEY=VALUE")
}

func (p *parser) prices(v *yaml.Node) error {
	if v.Kind != yaml.MappingNode {
		return p.errf(v, "prices", "must map model names to {input, output, cacheRead, cacheWrite} in USD per million tokens")
	}
	p.s.Prices = cost.Table{}
	return pairs(v, func(k, pv *yaml.Node) error {
		pr, err := cost.ParsePrice(pv)
		if err != nil {
			return p.errf(pv, "prices."+k.Value, "%v", err)
		}
		p.s.Prices[k.Value] = pr
		return nil
	})
}

func (p *parser) workspace(v *yaml.Node) error {
	if v.Kind == yaml.ScalarNode {
		p.s.Workspace.Template = p.path(v.Value)
		return nil
	}
	if v.Kind != yaml.MappingNode {
		return p.errf(v, "workspace", "must be a template directory or {template, setup, prepare}")
	}
	return pairs(v, func(k, n *yaml.Node) error {
		f := "workspace." + k.Value
		switch canonical(k.Value) {
		case "template":
			var t string
			err := p.str(n, f, &t)
			p.s.Workspace.Template = p.path(t)
			return err
		case "setup", "before-each":
			return p.str(n, f, &p.s.Workspace.Setup)
		case "prepare", "before-all":
			return p.str(n, f, &p.s.Workspace.Prepare)
		case "repos":
			return p.errf(k, f, "not supported: put the repositories in the template (or clone them in prepare)")
		}
		return p.errf(k, f, "unknown key (known: template, setup or before_each, prepare or before_all)")
	})
}

// gateKeys are the keys of gates: the gate flags of trials, then those of
// the comparison gate.
var gateKeys = []string{"min-pass-rate", "min-pass-at", "min-pass-exp", "min-coverage", "allow-grader-errors", "fail-on", "leave-out", "max-cost", "max-tokens",
	"baseline", "max-regression", "significance"}

func (p *parser) gates(v *yaml.Node) error {
	if v.Kind != yaml.MappingNode {
		return p.errf(v, "gates", "must be a mapping such as {min-pass-rate: 0.8, min-pass-at: {1: 0.6}}")
	}
	var cmp struct {
		baseline, drop, alpha *yaml.Node
		dropKey, alphaKey     *yaml.Node
	}
	err := pairs(v, func(k, n *yaml.Node) error {
		key := canonical(k.Value)
		if !slices.Contains(gateKeys, key) {
			return p.errf(k, "gates."+k.Value, "unknown gate%s (known: %s)", meant(key, gateKeys), strings.Join(gateKeys, ", "))
		}
		switch key {
		case "baseline":
			cmp.baseline = k
			var name string
			if err := p.str(n, "gates."+k.Value, &name); err != nil {
				return err
			}
			p.s.Regression = &RegressionGate{Baseline: name, Alpha: DefaultAlpha, Line: k.Line}
			return nil
		case "max-regression":
			cmp.drop, cmp.dropKey = n, k
			return nil
		case "significance":
			cmp.alpha, cmp.alphaKey = n, k
			return nil
		}
		if (key == "min-pass-at" || key == "min-pass-exp") && n.Kind == yaml.MappingNode {
			f := Flag{Name: key, Line: k.Line, Field: "gates." + k.Value}
			err := pairs(n, func(kk, kv *yaml.Node) error {
				f.Values = append(f.Values, kk.Value+"="+kv.Value)
				return nil
			})
			p.s.Flags = append(p.s.Flags, f)
			return err
		}
		f, err := p.flag(k, n, "gates.")
		p.s.Flags = append(p.s.Flags, f)
		return err
	})
	return errors.Join(err, p.regressionGate(cmp.baseline, cmp.dropKey, cmp.drop, cmp.alphaKey, cmp.alpha))
}

// regressionGate reads the comparison gate's drop and significance level
// (the baseline is read, and checked against the agents, elsewhere).
func (p *parser) regressionGate(baseline, dropKey, drop, alphaKey, alpha *yaml.Node) error {
	g := p.s.Regression
	if g == nil {
		if baseline != nil {
			return nil // its own error is told
		}
		for _, k := range []*yaml.Node{dropKey, alphaKey} {
			if k != nil {
				return p.errf(k, "gates."+k.Value, "compares each agent with a baseline: name it in gates.baseline (one of the suite's agents)")
			}
		}
		return nil
	}
	var errs []error
	if drop != nil {
		x, err := strconv.ParseFloat(drop.Value, 64)
		if err != nil || drop.Kind != yaml.ScalarNode || x < 0 || x > 1 {
			errs = append(errs, p.errf(drop, "gates."+dropKey.Value, "want the largest allowed drop of pass rate, a fraction between 0 and 1 (0.05, not 5), got %q", drop.Value))
		}
		g.MaxDrop = x
	}
	if alpha != nil {
		x, err := strconv.ParseFloat(alpha.Value, 64)
		if err != nil || alpha.Kind != yaml.ScalarNode || x <= 0 || x >= 1 {
			errs = append(errs, p.errf(alpha, "gates."+alphaKey.Value, "want a significance level between 0 and 1 (0.05), got %q", alpha.Value))
		}
		g.Alpha = x
	}
	return errors.Join(errs...)
}

// checkBaseline checks that the comparison gate's baseline is one of the
// suite's agents (the agents may come after the gates in the file).
func (s *Suite) checkBaseline() error {
	g := s.Regression
	if g == nil {
		return nil
	}
	var names []string
	for _, a := range s.Agents {
		names = append(names, a.Name)
	}
	if len(names) < 2 {
		return &Error{File: s.File, Line: g.Line, Field: "gates.baseline", Msg: "compares the suite's agents with one of them: name two agents or more under agents"}
	}
	if !slices.Contains(names, g.Baseline) {
		msg := fmt.Sprintf("no agent %q", g.Baseline)
		if n := suggest.Nearest(g.Baseline, names); n != "" {
			msg += fmt.Sprintf(": did you mean %s?", n)
		}
		return &Error{File: s.File, Line: g.Line, Field: "gates.baseline", Msg: msg + " (agents: " + strings.Join(names, ", ") + ")"}
	}
	return nil
}

// flag reads a run flag set by its long name: a scalar, or a list for a
// repeatable flag.
func (p *parser) flag(k, v *yaml.Node, prefix string) (Flag, error) {
	f := Flag{Name: canonical(k.Value), Line: k.Line, Field: prefix + k.Value}
	switch v.Kind {
	case yaml.ScalarNode:
		f.Values = []string{v.Value}
	case yaml.SequenceNode:
		for _, e := range v.Content {
			if e.Kind != yaml.ScalarNode {
				return f, p.errf(e, prefix+k.Value, "must be a list of values")
			}
			f.Values = append(f.Values, e.Value)
		}
	default:
		if hint := meant(f.Name, RootKeys); hint != "" && prefix == "" {
			return f, p.errf(k, prefix+k.Value, "unknown key%s (a run flag takes a value or a list of values; known keys: %s)", hint, strings.Join(RootKeys, ", "))
		}
		return f, p.errf(k, prefix+k.Value, "unknown key: a run flag takes a value or a list of values (known keys: %s)", strings.Join(RootKeys, ", "))
	}
	// The image flags name paths relative to the suite, when written so.
	if f.Name == "image" || f.Name == "tasks" || f.Name == "cache-dir" {
		for i, val := range f.Values {
			if strings.HasPrefix(val, "./") || strings.HasPrefix(val, "../") {
				f.Values[i] = p.path(val)
			}
		}
	}
	return f, nil
}

// SplitWords splits a command line into words as a POSIX shell does for
// quotes and backslashes, without expansions.
func SplitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated ' in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte(`"\$`+"`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated \" in %q", s)
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
