// Package fakemodel serves scripted stand-ins for the model APIs real coding
// agents call: Anthropic Messages (Claude Code), Gemini generateContent
// (Gemini CLI) and OpenAI Responses (Codex). Tests point an unmodified agent
// at one of them, on 127.0.0.1, and drive it through a whole prompt turn
// offline.
//
// Every handler scripts its reply from the conversation state of the
// request, never from how many calls came before, so that the side calls
// agents make to the same endpoint (titles, routers, summaries) and retries
// cannot derail it:
//
//   - the last user turn carries a tool result: reply with the final text
//     FinalPrefix + the tool's output; except (Anthropic) a result of
//     Claude Code's ToolSearch, which loads the tools it defers (MCP
//     tools among them): then the prompt's "tool NAME" is called, now
//     offered;
//   - tools are offered and the last user turn is text: reply with a thought,
//     a short text (Preamble) and one tool call chosen by ParseCommand from
//     the prompt text;
//   - (Anthropic) a prompt with "then" lines is a Script of several tool
//     calls: the turn's tool results so far say which one is next, and the
//     final text comes after the last; a step may name an input of an
//     earlier tool call of the conversation ({{prev.KEY}}), so that a
//     later turn's answer depends on the history the request carries;
//   - no tools offered, or JSON output requested: reply with short text, or
//     JSON built from the requested schema; (Anthropic) Claude Code's auto
//     mode asking for an action's harm (<severity>N</severity>) is told 0;
//   - (Anthropic) Claude Code's suggestion mode, the request it sends
//     after a turn for what the user might type next (its prompt starts
//     with SuggestionMarker), is answered with SuggestionReply, plain text,
//     though it offers tools.
//
// A prompt with a line starting with "slow" makes the tool-call reply wait
// Options.Slow (or until the client goes away or the server closes), which
// is how tests exercise session/cancel.
//
// Servers listen on 127.0.0.1 only (httptest), record every request in a
// bounded Log, and stop with Close.
package fakemodel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Texts the fake models put in their replies, for tests to look for.
const (
	// FinalPrefix starts the final answer given after a tool result.
	FinalPrefix = "Done. The tool returned: "
	// Preamble is the short text sent with a tool call.
	Preamble = "Let me check."
	// SideReply is the answer to requests that offer no tools.
	SideReply = "Fake summary."
	// SuggestionReply is the answer to Claude Code's suggestion mode, the
	// request it sends after a turn for what the user might type next:
	// plain text, never a tool call, though the request offers tools.
	SuggestionReply = "try it out"
	// SuggestionMarker starts the prompt of that request.
	SuggestionMarker = "[SUGGESTION MODE:"
	// ThoughtMarker is part of every scripted thought.
	ThoughtMarker = "fake model is thinking"
	// Unresolved starts the answer to a script step that names an input
	// no earlier tool call of the conversation had (see Expand).
	Unresolved = "I cannot tell what that refers to: "
)

// Options tunes the scripted replies.
type Options struct {
	// Slow is how long a tool-call reply to a slow prompt (see
	// ParseCommand) waits; 0 means 30 s. The wait ends early when the
	// client disconnects or the server closes.
	Slow time.Duration
	// MaxRequests bounds the requests served; later ones get 503. 0 means
	// 1000.
	MaxRequests int
	// MaxBody bounds a request body; 0 means 32 MiB.
	MaxBody int64
	// Usage, when set, is the token counts every reply reports, in each
	// API's own fields (see Usage); nil keeps the defaults: 100 input and
	// 20 output tokens (and, from OpenAI, 5 of them reasoning).
	Usage *Usage
	// Fail answers the first len(Fail) requests with these HTTP statuses
	// instead (429, 500, 503, 529...), each with the API's error body and
	// a retry-after of RetryAfter (0 unless set); the requests after them
	// are served as usual.
	Fail []int
	// RetryAfter is the retry-after the injected errors ask for.
	RetryAfter time.Duration
	// EventDelay is a pause before each server-sent event after the first:
	// a slow stream.
	EventDelay time.Duration
	// UserTurns scripts a simulated user (Anthropic): a request that forces
	// a tool call (tool_choice {"type": "tool"}) is answered with that tool
	// called with {"message": UserTurns[n]}, n the assistant messages of
	// the request less one (the user's opening turn is the conversation's
	// first assistant message), "{{last}}" in it replaced by the text of
	// the request's last user message; past the list, with {"stop": true,
	// "reason": UserStop}.
	UserTurns []string
	// UserStop is the scripted user's reason to stop.
	UserStop string
}

// Usage is the token counts a fake reply reports. Each API words them its
// own way: Anthropic input_tokens (Input), cache_read_input_tokens
// (Cached), cache_creation_input_tokens (CacheWrite), output_tokens
// (Output); OpenAI input_tokens (Input+Cached) with cached_tokens,
// output_tokens (Output) with reasoning_tokens (Reasoning); Gemini
// promptTokenCount (Input+Cached) with cachedContentTokenCount,
// candidatesTokenCount (Output-Reasoning) and thoughtsTokenCount
// (Reasoning).
type Usage struct {
	Input, Cached, CacheWrite, Output, Reasoning int64
}

func (o Options) usage(def Usage) Usage {
	if o.Usage == nil {
		return def
	}
	return *o.Usage
}

func (o Options) slow() time.Duration {
	if o.Slow <= 0 {
		return 30 * time.Second
	}
	return o.Slow
}

func (o Options) maxRequests() int {
	if o.MaxRequests <= 0 {
		return 1000
	}
	return o.MaxRequests
}

func (o Options) maxBody() int64 {
	if o.MaxBody <= 0 {
		return 32 << 20
	}
	return o.MaxBody
}

// Request is one HTTP request a fake model received, with what it replied.
type Request struct {
	// At is when the request arrived.
	At time.Time
	// Method, Path and Query are those of the request line.
	Method string
	Path   string
	Query  string
	// Header holds the request headers.
	Header http.Header
	// Body is the request body as sent.
	Body []byte
	// Reply says what the fake scripted: "tool:<name>", "final", "side",
	// "suggestion", "json", "count_tokens", "cancelled", "unresolved",
	// "other" or "error: ...".
	Reply string
	// Prompt is the prompt text the reply was chosen from, if any.
	Prompt string
}

// Log records the requests a fake model received. It is safe for
// concurrent use.
type Log struct {
	mu     sync.Mutex
	reqs   []*Request
	served int // requests taken, for Options.Fail
}

// Requests returns a copy of every request received so far, in arrival
// order.
func (l *Log) Requests() []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Request, len(l.reqs))
	for i, r := range l.reqs {
		out[i] = *r
	}
	return out
}

// add records r, unless the log already holds limit requests.
func (l *Log) add(r *Request, limit int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.reqs) >= limit {
		return false
	}
	l.reqs = append(l.reqs, r)
	return true
}

func (l *Log) setReply(r *Request, reply, prompt string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r.Reply, r.Prompt = reply, prompt
}

// Server is a fake model API on 127.0.0.1.
type Server struct {
	// URL is the server's base URL, http://127.0.0.1:PORT, with no path.
	URL string
	// Log holds the requests received.
	Log  *Log
	srv  *httptest.Server
	done chan struct{}
	once sync.Once
}

// API builds one model API's handler. It must record every request in log
// and give up slow replies when done is closed.
type API func(log *Log, opts Options, done <-chan struct{}) http.Handler

// Start serves api on a fresh 127.0.0.1 port. Close stops it.
func Start(api API, opts Options) *Server {
	s := &Server{Log: &Log{}, done: make(chan struct{})}
	s.srv = httptest.NewServer(api(s.Log, opts, s.done))
	s.URL = s.srv.URL
	return s
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request { return s.Log.Requests() }

// Close ends any slow reply in progress and stops the server.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.done)
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

// base reads and records a request. It returns nil when it has answered
// the request itself (too many requests, unreadable body).
func base(log *Log, opts Options, w http.ResponseWriter, r *http.Request) *Request {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, opts.maxBody()))
	req := &Request{At: time.Now(), Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
		Header: r.Header.Clone(), Body: body}
	if !log.add(req, opts.maxRequests()) {
		http.Error(w, "fakemodel: request limit reached", http.StatusServiceUnavailable)
		return nil
	}
	if err != nil {
		log.setReply(req, "error: "+err.Error(), "")
		http.Error(w, "fakemodel: reading body: "+err.Error(), http.StatusRequestEntityTooLarge)
		return nil
	}
	log.mu.Lock()
	n := log.served
	log.served++
	log.mu.Unlock()
	if n < len(opts.Fail) {
		status := opts.Fail[n]
		log.setReply(req, fmt.Sprintf("fail: %d", status), "")
		fail(w, r.URL.Path, status, opts.RetryAfter)
		return nil
	}
	return req
}

// fail answers an injected error in the body shape of the API the path
// belongs to.
func fail(w http.ResponseWriter, path string, status int, after time.Duration) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", fmt.Sprint(int(after.Seconds())))
	w.Header().Set("Retry-After-Ms", fmt.Sprint(max(after.Milliseconds(), 1)))
	msg := http.StatusText(status)
	var body string
	switch {
	case strings.Contains(path, ":"):
		body = fmt.Sprintf(`{"error":{"code":%d,"message":%q,"status":"UNAVAILABLE"}}`, status, msg)
	case strings.HasSuffix(path, "/messages"):
		typ := "api_error"
		switch status {
		case 429:
			typ = "rate_limit_error"
		case 529:
			typ, msg = "overloaded_error", "Overloaded"
		}
		body = fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":%q}}`, typ, msg)
	default:
		body = fmt.Sprintf(`{"error":{"message":%q,"type":"server_error","code":null}}`, msg)
	}
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// Command is the tool call a prompt asks for.
type Command struct {
	// Op is "read", "write", "bash", "plan" or "echo" (anything else).
	Op string
	// Path is the file of read and write.
	Path string
	// Text is what write writes.
	Text string
	// Shell is the command line to run when the agent has no better tool:
	// the bash command, "cat PATH" for read, "echo hi" for echo and plan,
	// empty for write.
	Shell string
	// Slow says a line of the prompt starts with "slow".
	Slow bool
	// Tool and Args are the tool of "tool NAME {ARGS}": an offered tool
	// called by its name (an MCP server's tool, mcp__SERVER__TOOL in
	// Claude Code, loaded through its ToolSearch first when it defers
	// it) with the JSON object ARGS.
	Tool string
	Args map[string]any
}

// ParseCommand picks the tool call for a prompt. The first line that starts
// with "read PATH", "write PATH TEXT", "bash CMD", "tool NAME {ARGS}" or
// "plan" decides;
// otherwise the call is the harmless shell "echo hi". A line that starts
// with "slow" marks the prompt slow (and may go on with a command, as in
// "slow bash sleep 1").
func ParseCommand(prompt string) Command {
	c := Command{Op: "echo", Shell: "echo hi"}
	found := false
	for _, line := range strings.Split(prompt, "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "slow"); ok && (rest == "" || rest[0] == ' ') {
			c.Slow = true
			line = strings.TrimSpace(rest)
		}
		if !found {
			found = c.parseLine(line)
		}
	}
	return c
}

// Script is what a prompt scripts: one tool call a model request, in
// order. Its first step is the prompt without its "then" lines (read by
// ParseCommand); each later line that starts with "then " is one more step
// ("then bash cat notes.txt"). A model plays step n+1 when the turn holds n
// tool results, and gives the final answer (FinalPrefix and the last
// result) after the last. A step may name what an earlier tool call of the
// conversation was given: {{prev.KEY}} is the KEY input (a string) of the
// latest tool call that had one, in this turn or an earlier one of the
// same conversation (see Expand).
type Script struct {
	// Steps are the steps' texts, each read by ParseCommand once
	// expanded.
	Steps []string
}

// ParseScript splits a prompt into its script's steps.
func ParseScript(prompt string) Script {
	var first []string
	var then []string
	for _, line := range strings.Split(prompt, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "then "); ok {
			then = append(then, strings.TrimSpace(rest))
			continue
		}
		first = append(first, line)
	}
	return Script{Steps: append([]string{strings.Join(first, "\n")}, then...)}
}

// Step returns step i expanded from the conversation's earlier tool
// inputs (see Expand), and whether the script has such a step.
func (s Script) Step(i int, lookup func(key string) (string, bool)) (Command, bool, error) {
	if i < 0 || i >= len(s.Steps) {
		return Command{}, false, nil
	}
	text, err := Expand(s.Steps[i], lookup)
	if err != nil {
		return Command{}, true, err
	}
	return ParseCommand(text), true, nil
}

// Expand replaces each {{prev.KEY}} of text by lookup(KEY): the KEY input
// of the conversation's latest tool call that had one. A key lookup does
// not find is an error naming it: the conversation does not hold what the
// text refers to.
func Expand(text string, lookup func(key string) (string, bool)) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(text, "{{prev.")
		if i < 0 {
			b.WriteString(text)
			return b.String(), nil
		}
		j := strings.Index(text[i:], "}}")
		if j < 0 {
			b.WriteString(text)
			return b.String(), nil
		}
		key := text[i+len("{{prev.") : i+j]
		v, ok := lookup(key)
		if !ok {
			return "", fmt.Errorf("no earlier tool call of the conversation has a %q input", key)
		}
		b.WriteString(text[:i])
		b.WriteString(v)
		text = text[i+j+2:]
	}
}

// parseLine reads one line as a command into c, and reports whether it
// was one.
func (c *Command) parseLine(line string) bool {
	op, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	switch op {
	case "read":
		if rest != "" {
			c.Op, c.Path, c.Shell = "read", rest, "cat "+rest
			return true
		}
	case "write":
		if path, text, _ := strings.Cut(rest, " "); path != "" {
			c.Op, c.Path, c.Text, c.Shell = "write", path, text, ""
			return true
		}
	case "bash":
		if rest != "" {
			c.Op, c.Shell = "bash", rest
			return true
		}
	case "plan":
		c.Op = "plan"
		return true
	case "tool":
		name, args, _ := strings.Cut(rest, " ")
		in := map[string]any{}
		if name != "" && (strings.TrimSpace(args) == "" || json.Unmarshal([]byte(args), &in) == nil) {
			c.Op, c.Tool, c.Args = "tool", name, in
			return true
		}
	}
	return false
}

// thought is the scripted thinking text for a tool call.
func thought(c Command, tool string) string {
	return fmt.Sprintf("The %s: the prompt asks for %s, so it will call %s.", ThoughtMarker, c.Op, tool)
}

// final is the scripted answer to a tool result.
func final(result string) string {
	return FinalPrefix + strings.TrimSpace(result)
}

// planStep is one step of the scripted plan.
type planStep struct{ Step, Status string }

// planSteps returns the steps of the scripted plan.
func planSteps() []planStep {
	return []planStep{
		{"Inspect files", "completed"},
		{"Make the change", "in_progress"},
		{"Run the tests", "pending"},
	}
}

// waitSlow waits the slow delay, or until the request or the server ends.
// It reports whether the full delay passed.
func waitSlow(ctx context.Context, opts Options, done <-chan struct{}) bool {
	t := time.NewTimer(opts.slow())
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-done:
		return false
	}
}

// sse writes server-sent events and flushes each.
type sse struct {
	w     http.ResponseWriter
	err   error
	crlf  bool
	delay time.Duration
	sent  int
}

func newSSE(w http.ResponseWriter, crlf bool, opts Options) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, crlf: crlf, delay: opts.EventDelay}
}

// event writes one event; name may be empty.
func (s *sse) event(name string, data []byte) {
	if s.err != nil {
		return
	}
	if s.sent > 0 && s.delay > 0 {
		time.Sleep(s.delay)
	}
	s.sent++
	var b bytes.Buffer
	nl := "\n"
	if s.crlf {
		nl = "\r\n"
	}
	if name != "" {
		b.WriteString("event: " + name + nl)
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString(nl + nl)
	if _, err := s.w.Write(b.Bytes()); err != nil {
		s.err = fmt.Errorf("writing event %q: %w", name, err)
		return
	}
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}
