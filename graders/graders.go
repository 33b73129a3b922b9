// Package graders turns a capture record into a grader result. It holds
// every grader kind the harness supports: executables speaking the
// acp-harness stdin/stdout protocol, commands speaking agentv's script
// protocol (with an optional LLM target proxy), JavaScript grade(input)
// functions and JS/TS modules run in-process with goja, an LLM judge over
// OpenAI-compatible chat completions or Anthropic messages, and weighted
// composites of these.
//
// A Grader never returns a Go error for a failed grading: the failure goes
// on the result's Error with one of the classes schemas.ErrGraderError,
// schemas.ErrGraderTimeout or schemas.ErrGraderInvalid, and pass=false.
// Load, on the other hand, returns an error naming the file and the field
// for any configuration problem, so a command can stop before any agent
// runs.
package graders

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"harness/internal/suggest"
	"harness/judgecache"
	"harness/sandbox"
	"harness/schemas"
)

// Grader grades one record. It never returns a Go error for a grader
// failure: failures go on the result's Error (class grader_error,
// grader_timeout or grader_invalid), and the record is never modified.
// A Grader is safe for concurrent use.
type Grader interface {
	// Name is a stable id for provenance, e.g. "exec:./check.py" or
	// "judge:config.yaml".
	Name() string
	// Grade grades one record. The result's Grader and DurationMs are
	// filled in.
	Grade(ctx context.Context, in *Input) schemas.GraderResult
}

// Input is what a grader sees: a record and, when known, its prompt case.
type Input struct {
	// Record is the trajectory record being graded; graders only read it.
	Record *schemas.CaptureRecord
	// Case is the prompt case the record came from. It may be nil (when
	// regrading stored records without --prompts); fields the record lacks
	// (expected, hint, reference) are taken from it when present.
	Case *schemas.PromptCase
}

// Default time limits per grading call.
const (
	// DefaultTimeout bounds executables, agentv scripts and the LLM judge.
	DefaultTimeout = 60 * time.Second
	// DefaultJSTimeout bounds in-process JavaScript graders.
	DefaultJSTimeout = 5 * time.Second
	// DefaultThreshold is the pass threshold of composites and of graders
	// that return a bare score.
	DefaultThreshold = 0.5
)

// Options configures Load.
type Options struct {
	// Timeout bounds one grading call; zero means DefaultTimeout for
	// executables, scripts and judges, DefaultJSTimeout for JavaScript. A
	// config file's "timeout" field overrides it for that grader.
	Timeout time.Duration
	// Getenv looks up environment variables (API keys, OPENAI_BASE_URL...);
	// nil means os.Getenv.
	Getenv func(string) string
	// Dir resolves relative -g paths; relative paths inside a config file
	// are resolved against the config file's directory. Empty means the
	// working directory. Executables run in this directory.
	Dir string
	// HTTPClient is used by the LLM judge and the target proxy; nil means a
	// client without its own timeout (every call is bounded by Timeout).
	HTTPClient *http.Client
	// Threshold overrides the composite pass threshold (and the threshold
	// applied to bare scores) when not nil.
	Threshold *float64
	// Sandbox, when set, runs executable and script graders in it.
	Sandbox sandbox.Runner
	// SecretEnv, when set, is told the name of every environment variable
	// a grader reads a credential from (the judge's API key), so the
	// caller can redact its value and keep it from the agent.
	SecretEnv func(name string)
	// JudgeCache, when set, keeps the LLM judge's answers: a request
	// answered before for the same trial is not sent again (see
	// WithJudgeDraw for repeated gradings). The target proxy of agentv
	// scripts is not cached.
	JudgeCache *judgecache.Cache
	// Warn, when set, is told once per grader of each thing its replies
	// hold that harness does not read (a misspelt result key), prefixed
	// with the grader's name.
	Warn func(msg string)

	// pins collects the files of the grader being loaded; set by the
	// outermost Load or FromConfig.
	pins *pinSet
}

// startPins gives opts a pin set when it has none; top says the caller
// is the outermost load, which wraps the grader with pin.
func (o *Options) startPins() (top bool) {
	if o.pins != nil {
		return false
	}
	dir := o.Dir
	if dir == "" {
		dir, _ = os.Getwd()
	}
	o.pins = &pinSet{dir: dir, seen: map[string]bool{}}
	return true
}

func (o Options) getenv(k string) string {
	if o.Getenv != nil {
		return o.Getenv(k)
	}
	return os.Getenv(k)
}

func (o Options) httpClient() *http.Client {
	if o.HTTPClient != nil {
		return o.HTTPClient
	}
	return &http.Client{}
}

func (o Options) timeout(def time.Duration) time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return def
}

func (o Options) threshold() float64 {
	if o.Threshold != nil {
		return *o.Threshold
	}
	return DefaultThreshold
}

func (o Options) abs(p string) string {
	if filepath.IsAbs(p) || o.Dir == "" {
		return p
	}
	return filepath.Join(o.Dir, p)
}

// Load builds the grader named by spec, the path given to -g:
//
//   - a .json, .yaml or .yml file is a grader config (see Config);
//   - a .js, .mjs, .cjs, .ts, .mts or .cts file is a JavaScript/TypeScript
//     module exporting grade (acp-harness style) or a script defining a
//     global grade(input) function (RFT style), run in-process;
//   - anything else is an executable speaking the acp-harness protocol.
//
// Errors name the file (and the field, for config files).
//
// Every file the grader runs or reads is fingerprinted (sha256) here;
// Fingerprints lists them, and a grading call after one of them changed
// is a grader error naming the file and both hashes.
func Load(spec string, opts Options) (Grader, error) {
	top := opts.startPins()
	g, err := loadSpec(spec, opts)
	if err != nil || !top {
		return g, err
	}
	return pin(note(g, opts.Warn), opts.pins), nil
}

// noting is a grader whose results' notes are told to warn, each once.
type noting struct {
	Grader
	warn func(string)
	mu   sync.Mutex
	said map[string]bool
}

// note wraps g so that the notes of its results go to warn, each once;
// with no warn, g comes back as it is.
func note(g Grader, warn func(string)) Grader {
	if warn == nil {
		return g
	}
	return &noting{Grader: g, warn: warn, said: map[string]bool{}}
}

// Grade implements Grader.
func (n *noting) Grade(ctx context.Context, in *Input) schemas.GraderResult {
	r := n.Grader.Grade(ctx, in)
	notes := r.Notes
	r.Notes = nil
	for _, s := range notes {
		n.mu.Lock()
		first := !n.said[s]
		n.said[s] = true
		n.mu.Unlock()
		if first {
			n.warn(n.Name() + ": " + s)
		}
	}
	return r
}

func loadSpec(spec string, opts Options) (Grader, error) {
	if spec == "" {
		return nil, fmt.Errorf("grader: empty path")
	}
	path := opts.abs(spec)
	if IsVerifier(spec) {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("grader %s: %w", spec, err)
		}
		if err := opts.pins.add(path); err != nil {
			return nil, err
		}
		return newVitestVerifier("vitest:"+spec, path, opts), nil
	}
	switch ext := strings.ToLower(filepath.Ext(spec)); ext {
	case ".json", ".yaml", ".yml":
		return loadConfigFile(spec, path, opts)
	case ".js", ".mjs", ".cjs", ".ts", ".mts", ".cts":
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("grader %s: %w", spec, err)
		}
		if err := opts.pins.add(path); err != nil {
			return nil, err
		}
		return newJSModule("js:"+spec, spec, string(src), ext, opts.timeout(DefaultJSTimeout), opts.threshold())
	default:
		g, err := newExecutable(spec, path, opts)
		if err != nil {
			return nil, err
		}
		if err := opts.pins.add(g.path); err != nil {
			return nil, err
		}
		return g, nil
	}
}

// finish fills in the harness-owned fields of a result.
func finish(r schemas.GraderResult, name string, start time.Time) schemas.GraderResult {
	r.Grader = name
	r.DurationMs = time.Since(start).Milliseconds()
	if r.Error != nil {
		r.Pass = false
	}
	return r
}

// failure builds the result of a grader that could not grade.
func failure(class, format string, args ...any) schemas.GraderResult {
	return schemas.GraderResult{Error: &schemas.ErrorInfo{Class: class, Message: fmt.Sprintf(format, args...)}}
}

// resultFields is the wire form of a grader's reply, loose enough to accept
// the acp-harness, agentv and older agentv (hits/misses, assertions) shapes.
type resultFields struct {
	Pass       *bool           `json:"pass"`
	Passed     *bool           `json:"passed"`
	Score      json.RawMessage `json:"score"`
	Reasoning  *string         `json:"reasoning"`
	Reason     *string         `json:"reason"`
	Checks     []checkFields   `json:"checks"`
	Assertions []struct {
		Text     string `json:"text"`
		Passed   bool   `json:"passed"`
		Evidence any    `json:"evidence"`
	} `json:"assertions"`
	Hits    []string       `json:"hits"`
	Misses  []string       `json:"misses"`
	Outcome map[string]any `json:"outcome"`
	Details map[string]any `json:"details"`
}

// checkFields is the wire form of one check: "passed" (agentv's word) is
// read as "pass", "reasoning" as "reason".
type checkFields struct {
	Text      string   `json:"text"`
	Pass      *bool    `json:"pass"`
	Passed    *bool    `json:"passed"`
	Score     *float64 `json:"score"`
	Reason    string   `json:"reason"`
	Reasoning string   `json:"reasoning"`
	Evidence  any      `json:"evidence"`
}

// Keys of a grader's reply and of its checks that harness reads; the
// fields harness fills in itself are accepted too.
var (
	resultKeys = []string{"pass", "passed", "score", "reasoning", "reason", "checks", "assertions", "hits", "misses",
		"outcome", "details", "grader", "durationMs", "usage", "error"}
	checkKeys = []string{"text", "pass", "passed", "score", "reason", "reasoning", "evidence"}
)

// unknownKeys words, for the grader's author, each key of a reply (and of
// its checks) that harness does not read, with the key probably meant.
func unknownKeys(m map[string]any) []string {
	var notes []string
	say := func(where, k string, known []string) {
		msg := fmt.Sprintf("%s key %q is not one harness reads, and is ignored", where, k)
		if s := suggest.Nearest(k, known); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		notes = append(notes, msg)
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(resultKeys, k) {
			say("result", k, resultKeys)
		}
	}
	checks, _ := m["checks"].([]any)
	seen := map[string]bool{}
	for _, c := range checks {
		cm, _ := c.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(cm)) {
			if !slices.Contains(checkKeys, k) && !seen[k] {
				seen[k] = true
				say("check", k, checkKeys)
			}
		}
	}
	return notes
}

// parseResult validates a grader's JSON reply. A reply needs a boolean pass
// or a numeric score in 0..1 (or both); a missing score is 1 or 0 from
// pass, a missing pass is score >= threshold. Errors are grader_invalid.
func parseResult(b []byte, threshold float64) (schemas.GraderResult, *schemas.ErrorInfo) {
	var f resultFields
	var probe any
	if err := json.Unmarshal(b, &probe); err != nil {
		return schemas.GraderResult{}, &schemas.ErrorInfo{Class: schemas.ErrGraderInvalid, Message: "output is not JSON: " + err.Error()}
	}
	obj, ok := probe.(map[string]any)
	if !ok {
		return schemas.GraderResult{}, &schemas.ErrorInfo{Class: schemas.ErrGraderInvalid, Message: "output is not a JSON object"}
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return schemas.GraderResult{}, &schemas.ErrorInfo{Class: schemas.ErrGraderInvalid, Message: "output is not a grader result: " + err.Error()}
	}
	var r schemas.GraderResult
	hasScore := len(f.Score) > 0 && string(f.Score) != "null"
	if hasScore {
		var s float64
		if err := json.Unmarshal(f.Score, &s); err != nil {
			return r, &schemas.ErrorInfo{Class: schemas.ErrGraderInvalid, Message: fmt.Sprintf("score %s is not a number", truncate(string(f.Score), 80))}
		}
		if ei := badScore(s); ei != nil {
			return r, ei
		}
		r.Score = s
	}
	pass := f.Pass
	if pass == nil {
		pass = f.Passed
	}
	switch {
	case pass == nil && !hasScore:
		return r, &schemas.ErrorInfo{Class: schemas.ErrGraderInvalid, Message: "result has neither pass nor score"}
	case pass == nil:
		r.Pass = r.Score >= threshold
	case !hasScore:
		r.Pass = *pass
		if r.Pass {
			r.Score = 1
		}
	default:
		r.Pass = *pass
	}
	if f.Reasoning != nil {
		r.Reasoning = *f.Reasoning
	} else if f.Reason != nil {
		r.Reasoning = *f.Reason
	}
	for _, c := range f.Checks {
		ck := schemas.Check{Text: c.Text, Score: c.Score, Reason: c.Reason, Evidence: c.Evidence}
		switch {
		case c.Pass != nil:
			ck.Pass = *c.Pass
		case c.Passed != nil:
			ck.Pass = *c.Passed
		}
		if ck.Reason == "" {
			ck.Reason = c.Reasoning
		}
		r.Checks = append(r.Checks, ck)
	}
	for _, a := range f.Assertions {
		r.Checks = append(r.Checks, schemas.Check{Text: a.Text, Pass: a.Passed, Evidence: a.Evidence})
	}
	for _, h := range f.Hits {
		r.Checks = append(r.Checks, schemas.Check{Text: h, Pass: true})
	}
	for _, m := range f.Misses {
		r.Checks = append(r.Checks, schemas.Check{Text: m, Pass: false})
	}
	r.Outcome = f.Outcome
	if r.Outcome == nil && f.Details != nil {
		r.Outcome = f.Details
	}
	r.Notes = unknownKeys(obj)
	return r, nil
}

// badScore says what is wrong with a score that is not in 0..1, or nil.
func badScore(s float64) *schemas.ErrorInfo {
	switch {
	case math.IsNaN(s):
		return &schemas.ErrorInfo{Class: schemas.ErrGraderInvalid, Message: "score is NaN, not a number (want a number in 0..1)"}
	case s < 0 || s > 1:
		return &schemas.ErrorInfo{Class: schemas.ErrGraderInvalid, Message: fmt.Sprintf("score %v is outside 0..1", s)}
	}
	return nil
}

// scoreResult turns a bare number into a result.
func scoreResult(s, threshold float64) (schemas.GraderResult, *schemas.ErrorInfo) {
	if ei := badScore(s); ei != nil {
		return schemas.GraderResult{}, ei
	}
	return schemas.GraderResult{Score: s, Pass: s >= threshold}, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// tail returns the last n bytes of s, trimmed.
func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}
