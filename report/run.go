// Package report turns results files (capture records or trials records)
// into things people and CI systems read: one self-contained HTML page
// (WriteHTML), JUnit XML (WriteJUnit) and a short markdown summary for
// pull-request comments (WriteMarkdownSummary).
//
// A results file is read once, streaming, into a Run: small per-case and
// per-trial facts (verdicts, scores, shortened reasoning, error classes,
// durations) stay in memory; the full records, trajectories included, are
// only kept when the HTML page needs them, and then in a temporary spool
// file rather than in memory.
//
// # Statuses
//
// A trial is "pass" or "fail" (its grader's verdict), "error" (an
// infrastructure error on the record or the grader: agent crash, timeout,
// grader error...; left out of n, never counted as a failure) or "ungraded"
// (no grader ran). A case, from its n graded trials of which c passed, is
// "pass" (c = n ≥ 1), "fail" (c = 0 < n), "flaky" (0 < c < n), "error"
// (n = 0 and some trial errored) or "ungraded" (n = 0, nothing errored).
package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"harness/review"
	"harness/schemas"
	"harness/trials"
)

// Statuses of trials and cases (see the package documentation).
const (
	StatusPass     = "pass"
	StatusFail     = "fail"
	StatusFlaky    = "flaky" // cases only: 0 < c < n
	StatusError    = "error"
	StatusUngraded = "ungraded"
)

// Limits on the text kept in memory per trial (the full text stays in the
// spooled record when details are kept).
const (
	maxReasoning = 2000
	maxMessage   = 1000
	maxInput     = 300
	// maxGraderOutput bounds the tail of a grader's command output (a
	// verifier's test.sh) kept for a trial that did not pass.
	maxGraderOutput = 8000
)

// RunOptions says how to read a run.
type RunOptions struct {
	// Details keeps every trial's full record (trajectory, output, grader
	// checks...) for WriteHTML. The records are spooled to a temporary file
	// in TempDir (default os.TempDir()); call Run.Close to remove it.
	// Without Details, WriteHTML shows the summary, the curves and the case
	// list but no trajectories; WriteJUnit and WriteMarkdownSummary never
	// need details.
	Details bool
	// TempDir is where the spool file goes.
	TempDir string
}

// Run is one results file (or one live run) reduced for reporting. Cases
// keep the order in which they first appear. A Run is not safe for
// concurrent use.
type Run struct {
	// Name names the run: the results file as given on the command line.
	Name string
	// Kind is schemas.KindCapture or schemas.KindTrials ("" before the first
	// record).
	Kind string
	// Cases holds one entry per case id.
	Cases []*Case
	// Agent, AgentVersion, Harness and Graders come from the first record's
	// provenance.
	Agent, AgentVersion, Harness string
	Graders                      []string
	// Start and End are the earliest start of the trials and the latest
	// moment a record was written (grading done; in records of older
	// runs, the latest end of a trial), epoch milliseconds (0 when
	// unknown): End − Start is the run's wall time.
	Start, End int64
	// Cost sums the trials' costs (nil when none reported any).
	Cost *schemas.Cost

	index     map[string]int
	seenTrial map[trialKey]int
	seenCase  map[string]int
	spool     *spool
	provSet   bool
}

type trialKey struct {
	id    string
	trial int
}

// Case is what a run says about one case.
type Case struct {
	// ID is the case id.
	ID string
	// Category is metadata.category ("" when absent).
	Category string
	// Input is the start of the case's input (turns joined by newlines).
	Input string
	// Expected is the case's expected answer.
	Expected string
	// K is the number of trials asked for the case: the trials record's k,
	// or for a capture file the number of records of the case.
	K int
	// Trials holds the case's trials in trial order.
	Trials []*Trial
	// Count holds n, c and the excluded trials by reason.
	Count trials.CaseCount
	// Warnings of the trials record, if any.
	Warnings []string
	// Adaptive is the trials record's adaptive part (an adaptive run).
	Adaptive *schemas.AdaptiveCase
}

// Trial is what is kept in memory about one trial.
type Trial struct {
	// Num is the 1-based trial number.
	Num int
	// Status is StatusPass, StatusFail, StatusError or StatusUngraded.
	Status string
	// Excluded is why the trial is not in n: an error class, or
	// trials.Ungraded ("" for a graded trial).
	Excluded string
	// Score is the grader's score (nil without a verdict).
	Score *float64
	// Reasoning is the grader's reasoning (shortened).
	Reasoning string
	// Checks are the grader's checks (reasons shortened, evidence dropped).
	Checks []schemas.Check
	// Grader names the grader.
	Grader string
	// GraderOutput is the tail of the grader's command output (a Harbor
	// verifier's test.sh, outcome.output) of a trial that did not pass.
	GraderOutput string
	// Error is the infrastructure error of the trial (message shortened),
	// from the record or from its grader.
	Error *schemas.ErrorInfo
	// Duration is the trial's duration in milliseconds (its agent, a
	// task's verification and the graders in its slot); Agent the
	// agent's part of it; Start its start and Written when its record was
	// written (grading done), epoch milliseconds (0 when unknown).
	Duration, Agent, Start, Written int64
	// StopReason is the agent's stop reason.
	StopReason string
	// Output is the start of the agent's final output.
	Output string
	// Cost is what the trial cost in USD (nil when not priced).
	Cost *float64
	// Steps counts trajectory steps; ToolCalls the tool_call steps among them.
	Steps, ToolCalls int

	// chunk and pos locate the full record in the spool (-1: none).
	chunk, pos int
}

// NewRun returns an empty run named name; add records with AddCapture or
// AddTrials (this is how a live run builds its report), or use ReadRun.
func NewRun(name string, opt RunOptions) (*Run, error) {
	r := &Run{
		Name:      name,
		index:     map[string]int{},
		seenTrial: map[trialKey]int{},
		seenCase:  map[string]int{},
	}
	if opt.Details {
		s, err := newSpool(opt.TempDir)
		if err != nil {
			return nil, fmt.Errorf("report %s: %w", name, err)
		}
		r.spool = s
	}
	return r, nil
}

// ReadRun reads a results file (capture records, or trials records with
// optional summary lines; see schemas.ReadResults) streaming, one line at a
// time. Bad lines, repeated cases or trials and empty files are
// *schemas.InputError values naming the file, the line and the field.
func ReadRun(name string, r io.Reader, opt RunOptions) (*Run, error) {
	run, err := NewRun(name, opt)
	if err != nil {
		return nil, err
	}
	_, err = schemas.ReadResults(name, r, func(l schemas.ResultLine) error {
		switch l.Kind {
		case schemas.KindCapture:
			return run.addCapture(l.Capture, l.Line)
		case schemas.KindTrials:
			return run.addTrials(l.Trials, l.Line)
		}
		return nil
	})
	if err == nil && len(run.Cases) == 0 {
		err = &schemas.InputError{File: name, Msg: "no records (the file is empty)"}
	}
	if err != nil {
		run.Close()
		return nil, err
	}
	return run, nil
}

// Close removes the spool file of a run read with Details. It is safe to
// call more than once.
func (r *Run) Close() error {
	if r.spool == nil {
		return nil
	}
	err := r.spool.close()
	r.spool = nil
	return err
}

// HasDetails says whether the run keeps full records for the HTML page.
func (r *Run) HasDetails() bool { return r.spool != nil }

// AddCapture adds one capture record (one trial of a case). Records of one
// case may come in any order; a case and trial seen before is an error.
func (r *Run) AddCapture(rec *schemas.CaptureRecord) error {
	return r.addCapture(rec, 0)
}

// AddTrials adds one trials record (every trial of a case). A case seen
// before is an error.
func (r *Run) AddTrials(tr *schemas.TrialsRecord) error {
	return r.addTrials(tr, 0)
}

func (r *Run) setKind(kind string, line int) error {
	if r.Kind == "" {
		r.Kind = kind
		return nil
	}
	if r.Kind != kind {
		return &schemas.InputError{File: r.Name, Line: line, Msg: fmt.Sprintf(
			"a %s record in a run of %s records", kind, r.Kind)}
	}
	return nil
}

func (r *Run) addCapture(rec *schemas.CaptureRecord, line int) error {
	if err := r.setKind(schemas.KindCapture, line); err != nil {
		return err
	}
	k := trialKey{rec.ID, rec.Trial}
	if first, dup := r.seenTrial[k]; dup && rec.Trial != 0 {
		return &schemas.InputError{File: r.Name, Line: line, Field: "trial", Msg: fmt.Sprintf(
			"case %q trial %d appears twice (first on line %d)", rec.ID, rec.Trial, first)}
	}
	r.seenTrial[k] = line
	c := r.caseFor(rec.ID)
	if c.Input == "" {
		c.Input = shorten(rec.Input.Text(), maxInput)
		c.Expected = shorten(rec.Expected, maxInput)
	}
	if c.Category == "" {
		c.Category = category(rec.Metadata)
	}
	if err := r.addTrial(c, rec, nil); err != nil {
		return err
	}
	c.K = max(c.K, len(c.Trials))
	return nil
}

func (r *Run) addTrials(tr *schemas.TrialsRecord, line int) error {
	if err := r.setKind(schemas.KindTrials, line); err != nil {
		return err
	}
	if first, dup := r.seenCase[tr.ID]; dup {
		return &schemas.InputError{File: r.Name, Line: line, Field: "id", Msg: fmt.Sprintf(
			"case %q appears twice (first on line %d)", tr.ID, first)}
	}
	r.seenCase[tr.ID] = line
	c := r.caseFor(tr.ID)
	c.Input = shorten(tr.Input.Text(), maxInput)
	c.Expected = shorten(tr.Expected, maxInput)
	c.Category = category(tr.Metadata)
	c.Warnings = tr.Warnings
	c.Adaptive = tr.Adaptive
	recs := review.TrialCaptures(tr)
	for i := range recs {
		if c.Category == "" {
			c.Category = category(recs[i].Metadata)
		}
		if err := r.addTrial(c, &recs[i], &tr.Trials[i]); err != nil {
			return err
		}
	}
	c.K = max(tr.K, len(c.Trials))
	return nil
}

func (r *Run) caseFor(id string) *Case {
	if i, ok := r.index[id]; ok {
		return r.Cases[i]
	}
	c := &Case{ID: id, Count: trials.CaseCount{ID: id}}
	r.index[id] = len(r.Cases)
	r.Cases = append(r.Cases, c)
	return c
}

// Case returns the case with the given id, or nil.
func (r *Run) Case(id string) *Case {
	if i, ok := r.index[id]; ok {
		return r.Cases[i]
	}
	return nil
}

// addTrial adds one trial of case c: rec, or the trials record's entry
// (when not nil) that rec was made from, which says how it counted.
func (r *Run) addTrial(c *Case, rec *schemas.CaptureRecord, entry *schemas.TrialEntry) error {
	if !r.provSet {
		p := rec.Provenance
		r.Agent, r.AgentVersion, r.Harness, r.Graders = p.AgentName, p.AgentVersion, p.Harness, p.Graders
		if r.Agent == "" && len(p.Command) > 0 {
			r.Agent = strings.Join(p.Command, " ")
		}
		r.provSet = true
	}
	if s := rec.Timing.Start; s > 0 && (r.Start == 0 || s < r.Start) {
		r.Start = s
	}
	r.End = max(r.End, rec.Timing.End, rec.Timing.Written)
	r.Cost = r.Cost.Add(rec.Cost)

	var pass bool
	var excluded string
	if entry != nil {
		pass, excluded = c.Count.AddEntry(entry)
	} else {
		pass, excluded = c.Count.Add(rec)
	}
	if c.Count.Hash == "" {
		c.Count.Hash = rec.CaseHash
	}
	t := &Trial{
		Num:        rec.Trial,
		Excluded:   excluded,
		Duration:   schemas.RecordDuration(rec),
		Agent:      schemas.AgentDuration(rec),
		Start:      rec.Timing.Start,
		Written:    max(rec.Timing.Written, rec.Timing.End),
		StopReason: rec.StopReason,
		Output:     shorten(rec.Output, maxInput),
		Steps:      len(rec.Trajectory),
		chunk:      -1,
		pos:        -1,
	}
	if t.Num == 0 {
		t.Num = len(c.Trials) + 1
	}
	if rec.Cost != nil {
		t.Cost = rec.Cost.USD
	}
	for i := range rec.Trajectory {
		if rec.Trajectory[i].Type == schemas.StepToolCall {
			t.ToolCalls++
		}
	}
	switch {
	case excluded == "" && pass:
		t.Status = StatusPass
	case excluded == "":
		t.Status = StatusFail
	case excluded == trials.Ungraded:
		t.Status = StatusUngraded
	default:
		t.Status = StatusError
	}
	if g := rec.Score; g != nil {
		t.Grader = g.Grader
		t.Reasoning = shorten(g.Reasoning, maxReasoning)
		if g.Error == nil {
			s := g.Score
			t.Score = &s
		}
		for _, ch := range g.Checks {
			ch.Reason = shorten(ch.Reason, maxMessage)
			ch.Text = shorten(ch.Text, maxMessage)
			ch.Evidence = evidenceText(ch.Evidence)
			t.Checks = append(t.Checks, ch)
		}
		if out, ok := g.Outcome["output"].(string); ok && t.Status != StatusPass {
			t.GraderOutput = tail(out, maxGraderOutput)
		}
	}
	var e *schemas.ErrorInfo
	switch {
	case rec.Error != nil:
		e = rec.Error
	case rec.Score != nil && rec.Score.Error != nil:
		e = rec.Score.Error
	}
	if e != nil {
		t.Error = &schemas.ErrorInfo{Class: excluded, Message: shorten(e.Message, maxMessage),
			Code: e.Code, ExitCode: e.ExitCode, Signal: e.Signal, Stderr: tail(e.Stderr, maxMessage)}
	}
	if r.spool != nil {
		chunk, pos, err := r.spool.add(rec)
		if err != nil {
			return fmt.Errorf("report %s: case %q trial %d: %w", r.Name, rec.ID, t.Num, err)
		}
		t.chunk, t.pos = chunk, pos
	}
	i, _ := slices.BinarySearchFunc(c.Trials, t.Num, func(x *Trial, n int) int { return x.Num - n })
	c.Trials = slices.Insert(c.Trials, i, t)
	return nil
}

// Status returns the case's status (see the package documentation).
func (c *Case) Status() string {
	n, k := c.Count.N, c.Count.C
	switch {
	case n == 0 && len(c.Count.Errors) > 0:
		return StatusError
	case n == 0:
		return StatusUngraded
	case k == n:
		return StatusPass
	case k == 0:
		return StatusFail
	}
	return StatusFlaky
}

// ErrorCount is how many trials of the case were left out of n for
// infrastructure errors.
func (c *Case) ErrorCount() int {
	total := 0
	for _, v := range c.Count.Errors {
		total += v
	}
	return total
}

// Missing is how many asked trials have no record.
func (c *Case) Missing() int { return max(0, c.K-len(c.Trials)) }

// Summary aggregates the run as the trials command does: means over cases
// of pass@k and pass^k with bootstrap intervals (seed and resamples as in
// trials.Summary.Result).
func (r *Run) Summary(seed uint64, resamples int) schemas.TrialsSummary {
	s := trials.NewSummary(0)
	for _, c := range r.Cases {
		if c.Adaptive != nil {
			s.AddAdaptiveCount(&c.Count, c.Adaptive)
			continue
		}
		s.AddCount(&c.Count, max(c.K, 1))
	}
	sum := s.Result(seed, resamples)
	sum.Cost = r.Cost
	return sum
}

// Trials counts the trial records of the run.
func (r *Run) Trials() int {
	n := 0
	for _, c := range r.Cases {
		n += len(c.Trials)
	}
	return n
}

// maxEvidence bounds a check's evidence kept in memory (the full text
// stays in the spooled record).
const maxEvidence = 2000

// evidenceText is a check's evidence as text, shortened: a string as it
// is, anything else as JSON; nil stays nil.
func evidenceText(v any) any {
	switch e := v.(type) {
	case nil:
		return nil
	case string:
		if e == "" {
			return nil
		}
		return shorten(e, maxEvidence)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return shorten(string(b), maxEvidence)
}

// category returns metadata.category as text.
func category(meta map[string]any) string {
	v, ok := meta["category"]
	if !ok || v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// shorten cuts s to at most n bytes on a rune boundary, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// tail keeps the last n bytes of s on a rune boundary, marking the cut.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := len(s) - n
	for cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut++
	}
	return "…" + s[cut:]
}

// spool keeps full records, as HTML-safe JSON, in a temporary file, grouped
// into chunks the page parses one at a time.
type spool struct {
	f         *os.File
	w         *bufio.Writer
	size      int64
	ends      []int64 // end offset of each finished chunk
	cur       int     // records in the open chunk
	curBytes  int64
	chunkRecs int
	chunkSize int64
}

// Chunk limits: a chunk closes when it holds this many records or bytes,
// so opening a case parses a bounded amount of JSON.
const (
	chunkRecords = 200
	chunkBytes   = 1 << 20
)

func newSpool(dir string) (*spool, error) {
	f, err := os.CreateTemp(dir, "harness-report-*.json")
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	return &spool{f: f, w: bufio.NewWriterSize(f, 1<<16), chunkRecs: chunkRecords, chunkSize: chunkBytes}, nil
}

// add writes one record and returns where it is: chunk and position.
func (s *spool) add(rec *schemas.CaptureRecord) (chunk, pos int, err error) {
	b, err := safeJSON(rec)
	if err != nil {
		return 0, 0, err
	}
	if s.cur >= s.chunkRecs || (s.cur > 0 && s.curBytes+int64(len(b)) > s.chunkSize) {
		s.ends = append(s.ends, s.size)
		s.cur, s.curBytes = 0, 0
	}
	if s.cur > 0 {
		if err := s.w.WriteByte(','); err != nil {
			return 0, 0, fmt.Errorf("spool: %w", err)
		}
		s.size++
		s.curBytes++
	}
	if _, err := s.w.Write(b); err != nil {
		return 0, 0, fmt.Errorf("spool: %w", err)
	}
	s.size += int64(len(b))
	s.curBytes += int64(len(b))
	pos = s.cur
	s.cur++
	return len(s.ends), pos, nil
}

// chunks calls fn with a reader of each chunk's records (comma-separated
// JSON objects), in order.
func (s *spool) chunks(fn func(i int, r io.Reader) error) error {
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	ends := s.ends
	if s.cur > 0 {
		ends = append(slices.Clone(ends), s.size)
	}
	var start int64
	for i, end := range ends {
		if err := fn(i, io.NewSectionReader(s.f, start, end-start)); err != nil {
			return err
		}
		start = end
	}
	return nil
}

func (s *spool) close() error {
	name := s.f.Name()
	err := s.f.Close()
	if rerr := os.Remove(name); err == nil && rerr != nil {
		err = rerr
	}
	return err
}
