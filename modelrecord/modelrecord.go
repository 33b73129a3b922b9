// Package modelrecord records the model calls of a run to a directory and
// serves them back: a modelgateway.Tape that makes a real agent's run
// repeatable offline, at no cost.
//
// A recording is a directory with one file per trial, TRIAL.jsonl.zst
// (TRIAL is the case id and trial number, "fix-bug-t1", path-escaped):
// zstd frames, one per call, each a JSON line holding the request (method,
// path, query, body) and the answer (status, content type, body) in the
// order the calls were made. Secrets are redacted before anything is
// written, request headers are not kept, a query's key parameter is
// dropped, and the trial's workspace path is written as ${WORKSPACE}.
//
// A replay serves each trial's calls from its own file: a request is
// answered by the first recorded call of the trial, not served yet, whose
// request is the same once normalized (see Normalize); a trial with no
// file of its own is served by the recorded trials of its case in turn
// (trial n by recorded trial (n-1) mod m + 1). A request with no match is
// a miss, reported with the difference from the nearest recorded request.
package modelrecord

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/klauspost/compress/zstd"
	"github.com/rogpeppe/go-internal/diff"

	"harness/modelgateway"
)

// Ext ends the name of every trial's file.
const Ext = ".jsonl.zst"

// WorkspaceMark stands for the trial's workspace path in recordings.
const WorkspaceMark = "${WORKSPACE}"

// Entry is one recorded call.
type Entry struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	Query  string `json:"query,omitempty"`
	// Request is the request body: JSON as it was, else text
	// (RequestText) or bytes (RequestBytes).
	Request      json.RawMessage `json:"request,omitempty"`
	RequestText  string          `json:"requestText,omitempty"`
	RequestBytes []byte          `json:"requestBytes,omitempty"`
	Status       int             `json:"status"`
	ContentType  string          `json:"contentType,omitempty"`
	// Answer is the answer's body as text, or as bytes (AnswerBytes)
	// when it is not UTF-8.
	Answer      string `json:"answer,omitempty"`
	AnswerBytes []byte `json:"answerBytes,omitempty"`
}

func (e *Entry) requestBody() []byte {
	switch {
	case len(e.Request) > 0:
		return e.Request
	case e.RequestText != "":
		return []byte(e.RequestText)
	}
	return e.RequestBytes
}

func (e *Entry) answerBody() []byte {
	if e.AnswerBytes != nil {
		return e.AnswerBytes
	}
	return []byte(e.Answer)
}

// Redactor takes secrets out of bytes before they are written.
type Redactor interface {
	Bytes([]byte) []byte
}

// Recorder is the Tape of a recording run: it lets every call through to
// the provider and appends each answer to its trial's file.
type Recorder struct {
	dir    string
	redact Redactor

	mu      sync.Mutex
	started map[string]bool // trial files begun in this run
	errs    []error
}

// NewRecorder records into dir (made if missing). redact, when not nil,
// takes secrets out of what is written.
func NewRecorder(dir string, redact Redactor) (*Recorder, error) {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("model recording %s: %w", dir, err)
	}
	return &Recorder{dir: dir, redact: redact, started: map[string]bool{}}, nil
}

// Serve lets every request through to the provider.
func (r *Recorder) Serve(context.Context, *modelgateway.Exchange) (*modelgateway.Answer, bool, error) {
	return nil, false, nil
}

// Record appends the call to its trial's file (a trial's file begun by an
// earlier run is replaced).
func (r *Recorder) Record(x *modelgateway.Exchange, a *modelgateway.Answer) {
	e := r.entry(x, a)
	line, err := json.Marshal(e)
	if err != nil {
		r.fail(err)
		return
	}
	var frame bytes.Buffer
	zw, _ := zstd.NewWriter(&frame)
	zw.Write(append(line, '\n'))
	zw.Close()
	name := filepath.Join(r.dir, FileName(x.Trial))
	r.mu.Lock()
	defer r.mu.Unlock()
	flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if !r.started[name] {
		flags |= os.O_TRUNC
		r.started[name] = true
	}
	f, err := os.OpenFile(name, flags, 0o666)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("model recording %s: %w", name, err))
		return
	}
	if _, err := f.Write(frame.Bytes()); err != nil {
		r.errs = append(r.errs, fmt.Errorf("model recording %s: %w", name, err))
	}
	if err := f.Close(); err != nil {
		r.errs = append(r.errs, fmt.Errorf("model recording %s: %w", name, err))
	}
}

func (r *Recorder) fail(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

// Err returns the errors writing the recording met, joined.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.errs...)
}

// entry is the call as written: redacted, the workspace path marked.
func (r *Recorder) entry(x *modelgateway.Exchange, a *modelgateway.Answer) *Entry {
	clean := func(b []byte) []byte {
		b = markPaths(b, x.Paths)
		if r.redact != nil {
			b = r.redact.Bytes(b)
		}
		return b
	}
	e := &Entry{Method: x.Method, Path: x.Path, Query: dropKey(x.Query), Status: a.Status, ContentType: a.Header.Get("Content-Type")}
	if r.redact != nil {
		e.Query = string(r.redact.Bytes([]byte(e.Query)))
	}
	body := clean(x.Body)
	switch {
	case json.Valid(body) && len(bytes.TrimSpace(body)) > 0:
		var buf bytes.Buffer
		json.Compact(&buf, body)
		e.Request = buf.Bytes()
	case utf8.Valid(body):
		e.RequestText = string(body)
	default:
		e.RequestBytes = body
	}
	ans := clean(a.Body)
	if utf8.Valid(ans) {
		e.Answer = string(ans)
	} else {
		e.AnswerBytes = ans
	}
	return e
}

// FileName is the name of a trial's file in a recording.
func FileName(trial string) string {
	if trial == "" {
		trial = "_agent" // calls made before the agent's first case
	}
	return url.PathEscape(trial) + Ext
}

// markPaths writes each path in b as WorkspaceMark.
func markPaths(b []byte, paths []string) []byte {
	for _, p := range paths {
		if len(p) > 1 {
			b = bytes.ReplaceAll(b, []byte(p), []byte(WorkspaceMark))
		}
	}
	return b
}

// dropKey removes the key parameter (Gemini's API key) from a query.
func dropKey(q string) string {
	if q == "" {
		return ""
	}
	v, err := url.ParseQuery(q)
	if err != nil || !v.Has("key") {
		return q
	}
	v.Del("key")
	return v.Encode()
}

// Read reads a trial's file.
func Read(name string) ([]Entry, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := zstd.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer zr.Close()
	var out []Entry
	br := bufio.NewReader(zr)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var e Entry
			if jerr := json.Unmarshal(line, &e); jerr != nil {
				return nil, fmt.Errorf("%s:%d: %w", name, n, jerr)
			}
			out = append(out, e)
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
	}
}

// Player is the Tape of a replaying run: it answers every request from the
// recording, and never reaches a provider.
type Player struct {
	dir    string
	redact Redactor

	mu     sync.Mutex
	trials map[string]*trialTape
}

type trialTape struct {
	name    string // the file it came from
	entries []Entry
	used    []bool
	err     error
}

// NewPlayer replays the recording in dir. redact, when not nil, is the
// recording run's redaction, applied to each request before it is compared.
func NewPlayer(dir string, redact Redactor) (*Player, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("model recording %s: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("model recording %s: not a directory", dir)
	}
	return &Player{dir: dir, redact: redact, trials: map[string]*trialTape{}}, nil
}

// Record is not called in a replay: nothing reaches the provider.
func (p *Player) Record(*modelgateway.Exchange, *modelgateway.Answer) {}

// Serve answers a request from its trial's recorded calls, or fails it
// with a *modelgateway.MissError.
func (p *Player) Serve(_ context.Context, x *modelgateway.Exchange) (*modelgateway.Answer, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.tape(x.Trial)
	if t.err != nil {
		return nil, false, &modelgateway.MissError{Reason: fmt.Sprintf("no recording of trial %s: %v", trialName(x.Trial), t.err)}
	}
	body := markPaths(x.Body, x.Paths)
	if p.redact != nil {
		body = p.redact.Bytes(body)
	}
	want := Normalize(x.Method, x.Path, dropKey(x.Query), body)
	for i := range t.entries {
		e := &t.entries[i]
		if t.used[i] || Normalize(e.Method, e.Path, e.Query, e.requestBody()) != want {
			continue
		}
		t.used[i] = true
		h := http.Header{}
		if e.ContentType != "" {
			h.Set("Content-Type", e.ContentType)
		}
		return &modelgateway.Answer{Status: e.Status, Header: h, Body: e.answerBody()}, true, nil
	}
	return nil, false, t.miss(x.Trial, want)
}

// miss is the error of a request with no recording: the difference from
// the nearest recorded request (the fewest differing lines, among those
// not served yet, else among all).
func (t *trialTape) miss(trial, want string) error {
	reason := fmt.Sprintf("no recorded call of trial %s (%s, %d calls) matches the request", trialName(trial), t.name, len(t.entries))
	var best string
	bestN := -1
	for pass := 0; pass < 2 && bestN < 0; pass++ {
		for i := range t.entries {
			if pass == 0 && t.used[i] {
				continue
			}
			e := &t.entries[i]
			d := diff.Diff("recorded", []byte(pretty(Normalize(e.Method, e.Path, e.Query, e.requestBody()))),
				"request", []byte(pretty(want)))
			n := bytes.Count(d, []byte("\n-")) + bytes.Count(d, []byte("\n+"))
			if bestN < 0 || n < bestN {
				best, bestN = string(d), n
			}
		}
	}
	const maxDiff = 16 << 10
	if len(best) > maxDiff {
		best = best[:maxDiff] + "\n[diff cut]\n"
	}
	return &modelgateway.MissError{Reason: reason, Diff: best}
}

func trialName(trial string) string {
	if trial == "" {
		return "(before the first case)"
	}
	return trial
}

// tape loads the recorded calls of a trial (once).
func (p *Player) tape(trial string) *trialTape {
	if t := p.trials[trial]; t != nil {
		return t
	}
	t := &trialTape{name: FileName(trial)}
	p.trials[trial] = t
	name := filepath.Join(p.dir, t.name)
	if _, err := os.Stat(name); errors.Is(err, os.ErrNotExist) {
		if alt := p.sibling(trial); alt != "" {
			t.name, name = alt, filepath.Join(p.dir, alt)
		}
	}
	t.entries, t.err = Read(name)
	if t.err != nil {
		t.err = fmt.Errorf("%s: %w", t.name, unwrapPath(t.err))
	}
	t.used = make([]bool, len(t.entries))
	return t
}

// unwrapPath keeps an os error's cause, not its machine path.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

var trialSuffix = regexp.MustCompile(`^(.*)-t([0-9]+)$`)

// sibling is the recorded trial of the same case that serves trial when
// it has no file of its own: of the m recorded trials, (n-1) mod m + 1.
func (p *Player) sibling(trial string) string {
	m := trialSuffix.FindStringSubmatch(trial)
	if m == nil {
		return ""
	}
	var n int
	fmt.Sscanf(m[2], "%d", &n)
	files, _ := filepath.Glob(filepath.Join(p.dir, "*"+Ext))
	var have []int
	for _, f := range files {
		base := strings.TrimSuffix(filepath.Base(f), Ext)
		name, err := url.PathUnescape(base)
		if err != nil {
			continue
		}
		if fm := trialSuffix.FindStringSubmatch(name); fm != nil && fm[1] == m[1] {
			var k int
			fmt.Sscanf(fm[2], "%d", &k)
			have = append(have, k)
		}
	}
	if len(have) == 0 || n < 1 {
		return ""
	}
	sort.Ints(have)
	return FileName(fmt.Sprintf("%s-t%d", m[1], have[(n-1)%len(have)]))
}

// The run-to-run changes Normalize removes from a request body.
var (
	uuidRe = regexp.MustCompile(`(?i)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	hexRe  = regexp.MustCompile(`(?i)[0-9a-f]{24,}`)
	dateRe = regexp.MustCompile(`\b[0-9]{4}-[0-9]{2}-[0-9]{2}\b`)
	timeRe = regexp.MustCompile(`\b[0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?(Z|[+-][0-9]{2}:?[0-9]{2})?\b`)
)

// Normalize is the form two requests are compared in: method, path and
// query as they are, and the body with what changes from run to run taken
// out. A JSON body loses its cache_control markers (wherever the agent put
// its cache breakpoints) and is written with sorted keys; then in any
// body, UUIDs become <uuid>, runs of 24 or more hex digits <hex>, dates
// (2006-01-02) <date> and times of day (15:04, 15:04:05.000Z) <time>.
// The workspace path is ${WORKSPACE} already (the Tape marks it).
func Normalize(method, path, query string, body []byte) string {
	var v any
	if json.Unmarshal(body, &v) == nil {
		v = dropCacheControl(v)
		body, _ = json.Marshal(v)
	}
	s := string(body)
	s = uuidRe.ReplaceAllString(s, "<uuid>")
	s = hexRe.ReplaceAllString(s, "<hex>")
	s = dateRe.ReplaceAllString(s, "<date>")
	s = timeRe.ReplaceAllString(s, "<time>")
	return method + " " + path + "?" + query + "\n" + s
}

func dropCacheControl(v any) any {
	switch t := v.(type) {
	case map[string]any:
		delete(t, "cache_control")
		for k, c := range t {
			t[k] = dropCacheControl(c)
		}
	case []any:
		for i, c := range t {
			t[i] = dropCacheControl(c)
		}
	}
	return v
}

// pretty lays a normalized request out a line per JSON value, so a diff
// shows the field that changed.
func pretty(norm string) string {
	head, body, _ := strings.Cut(norm, "\n")
	var buf bytes.Buffer
	if json.Indent(&buf, []byte(body), "", "  ") == nil {
		// Long strings (prompts) are cut at their line breaks.
		return head + "\n" + strings.ReplaceAll(buf.String(), `\n`, "\\n\n    ") + "\n"
	}
	return norm + "\n"
}
