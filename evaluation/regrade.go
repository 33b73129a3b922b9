package evaluation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"harness/graders"
	"harness/results"
	"harness/schemas"
	"harness/trials"
)

// ErrInterrupted marks a regrade cut short by its context.
var ErrInterrupted = errors.New("interrupted")

// Source is one results file to regrade.
type Source struct {
	// Name is the file's name ("-" for standard input).
	Name string
	// Open opens its content (decompressed).
	Open func() (io.ReadCloser, error)
}

// RegradeOptions configure Regrade.
type RegradeOptions struct {
	// Grader grades each record; Count is how many graders it combines
	// (with more than one, each result goes in "scores").
	Grader graders.Grader
	Count  int
	// Names go in each record's provenance.graders, Files in its
	// provenance.graderFiles.
	Names []string
	Files []schemas.GraderFile
	// Concurrency is how many records are graded at once.
	Concurrency int
	// Cases, when set, supply each record's case (expected, hint,
	// reference) by id.
	Cases map[string]*schemas.PromptCase
	// Chosen, when set, says which records (by index over all files, 0
	// first) to grade; the others are left out of the output.
	Chosen func(index int) bool
	// Redact, when set, rewrites each line before it is graded, so that
	// graders (and a judge's model) never see a secret.
	Redact func([]byte) []byte
	// Summary, when set, takes the new summary of a trials file instead
	// of it being written as the last line.
	Summary func(schemas.TrialsSummary) error
	// Seed and Resamples are for the summary of a trials file.
	Seed      uint64
	Resamples int
	// Rebuild, when set, remakes a record's workspace whose copy is gone
	// (from its template and recorded changes) in a new directory, for
	// the graders; cleanup removes it after.
	Rebuild func(rec *schemas.CaptureRecord) (dir string, cleanup func(), err error)
	// WorkspaceGone is told of each record whose workspace copy no
	// longer exists (graders that read it cannot judge it); where is
	// "FILE:LINE" or "FILE:LINE trial N".
	WorkspaceGone func(where string, rec *schemas.CaptureRecord)
}

// RegradeStats counts what Regrade did. Records are counted per trial:
// a trials record of k trials counts k.
type RegradeStats struct {
	Graded, Passed, Failed, Errored int
	// Skipped counts records not graded because their run failed.
	Skipped int
	// TrialsRecords counts trials records regraded (their metrics are
	// recomputed).
	TrialsRecords int
	// WorkspacesGone counts records whose workspace copy no longer exists.
	WorkspacesGone int
	// GraderErrors are the distinct grader errors, each by its gist
	// (schemas.ErrorInfo.Gist) with how many records had it, in the order
	// first met.
	GraderErrors []ErrorCount
}

// ErrorCount is one distinct error and how many records had it.
type ErrorCount struct {
	Gist  string
	Count int
}

// addError counts one record's error by its gist.
func (s *RegradeStats) addError(gist string, n int) {
	for i := range s.GraderErrors {
		if s.GraderErrors[i].Gist == gist {
			s.GraderErrors[i].Count += n
			return
		}
	}
	s.GraderErrors = append(s.GraderErrors, ErrorCount{gist, n})
}

// regradeJob is one line to regrade, in input order.
type regradeJob struct {
	seq  int
	file string
	line int
	raw  []byte
}

// regradeDone is a regraded line ready to write.
type regradeDone struct {
	seq    int
	out    []byte
	trials *schemas.TrialsRecord // set for a trials record
	stats  RegradeStats
	err    error
	gone   []goneWorkspace
}

// goneWorkspace is a record whose workspace copy no longer exists.
type goneWorkspace struct {
	where string
	rec   *schemas.CaptureRecord
}

// Regrade grades again every record of the sources and writes each to out
// in input order, whole, with only its grading fields changed: capture (and
// graded) records get new score, scores and provenance.graders; a trials
// record has each trial regraded and its n, c, pass@k and pass^k
// recomputed, and the trials summary is written anew after the last one.
// Records whose run failed pass through ungraded. A line of unknown shape
// stops the regrade with an *schemas.InputError naming the file and line.
func Regrade(ctx context.Context, sources []Source, out *results.Output, opts RegradeOptions) (RegradeStats, error) {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	conc := max(opts.Concurrency, 1)
	names, _ := json.Marshal(opts.Names)
	var files json.RawMessage // nil drops a stale graderFiles
	if len(opts.Files) > 0 {
		files = mustMarshal(opts.Files)
	}
	window := 2 * conc
	slots := make(chan struct{}, window)
	jobs := make(chan regradeJob)
	done := make(chan regradeDone, window)
	var readErr error
	go func() {
		defer close(jobs)
		index, seq := 0, 0
		for _, src := range sources {
			r, err := src.Open()
			if err != nil {
				readErr = err
				return
			}
			err = schemas.EachLine(r, func(lineNo int, line []byte) error {
				if isSummaryLine(line) {
					return nil // a new one is written at the end
				}
				i := index
				index++
				if opts.Chosen != nil && !opts.Chosen(i) {
					return nil
				}
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					return ctx.Err()
				}
				raw := bytes.Clone(line)
				if opts.Redact != nil {
					raw = opts.Redact(raw)
				}
				jobs <- regradeJob{seq: seq, file: src.Name, line: lineNo, raw: raw}
				seq++
				return nil
			})
			r.Close()
			if err != nil {
				if ctx.Err() == nil {
					readErr = fmt.Errorf("%s: %w", src.Name, err)
				}
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for j := range jobs {
				done <- regradeLine(ctx, j, opts, names, files)
			}
		})
	}
	go func() { wg.Wait(); close(done) }()

	// Write in input order.
	var st RegradeStats
	var summary *trials.Summary
	pending := map[int]regradeDone{}
	next := 0
	var firstErr error
	for d := range done {
		pending[d.seq] = d
		for {
			p, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			<-slots
			if errors.Is(p.err, ErrInterrupted) {
				continue
			}
			if p.err != nil {
				if firstErr == nil {
					firstErr = p.err
					cancel()
				}
				continue
			}
			if firstErr != nil {
				continue
			}
			for _, g := range p.gone {
				if opts.WorkspaceGone != nil {
					opts.WorkspaceGone(g.where, g.rec)
				}
			}
			if err := out.WriteRaw(p.out); err != nil {
				firstErr = err
				cancel()
				continue
			}
			if p.trials != nil {
				if summary == nil {
					summary = trials.NewSummary(p.trials.K)
				}
				summary.Add(*p.trials)
			}
			st.add(p.stats)
		}
	}
	if readErr != nil && firstErr == nil {
		firstErr = readErr
	}
	if firstErr == nil && summary != nil && parent.Err() == nil {
		res := summary.Result(opts.Seed, opts.Resamples)
		var err error
		if opts.Summary != nil {
			err = opts.Summary(res)
		} else {
			err = out.Write(res)
		}
		if err != nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		return st, firstErr
	}
	if parent.Err() != nil {
		return st, ErrInterrupted
	}
	return st, nil
}

func (s *RegradeStats) add(o RegradeStats) {
	s.Graded += o.Graded
	s.Passed += o.Passed
	s.Failed += o.Failed
	s.Errored += o.Errored
	s.Skipped += o.Skipped
	s.TrialsRecords += o.TrialsRecords
	s.WorkspacesGone += o.WorkspacesGone
	for _, e := range o.GraderErrors {
		s.addError(e.Gist, e.Count)
	}
}

// isSummaryLine tells a trials summary line without decoding it whole.
func isSummaryLine(line []byte) bool {
	if !bytes.Contains(line, []byte(schemas.SummaryType)) {
		return false
	}
	var probe struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(line, &probe) == nil && probe.Type == schemas.SummaryType
}

// regradeLine regrades one line of a results file.
func regradeLine(ctx context.Context, j regradeJob, opts RegradeOptions, names, files json.RawMessage) regradeDone {
	d := regradeDone{seq: j.seq}
	rl, err := schemas.ParseResultLine(j.raw)
	if err != nil {
		var ie *schemas.InputError
		if errors.As(err, &ie) {
			ie.File, ie.Line = j.file, j.line
		}
		d.err = err
		return d
	}
	switch rl.Kind {
	case schemas.KindCapture:
		res, graded, gone, err := regradeRecord(ctx, rl.Capture, opts, fmt.Sprintf("%s:%d", j.file, j.line))
		if err != nil {
			d.err = err
			return d
		}
		d.gone = gone
		if !graded {
			d.out = j.raw
			d.stats.Skipped = 1
			return d
		}
		d.stats.count(res, opts.Count)
		d.stats.WorkspacesGone = len(gone)
		d.out, d.err = spliceScores(j, res, opts.Count, names, files)
		return d
	default: // schemas.KindTrials
		tr := rl.Trials
		recs := make([]schemas.CaptureRecord, len(tr.Trials))
		for i := range tr.Trials {
			rec := tr.Trials[i].Capture()
			rec.ID = tr.ID
			where := fmt.Sprintf("%s:%d trial %d", j.file, j.line, rec.Trial)
			res, graded, gone, err := regradeRecord(ctx, &rec, opts, where)
			if err != nil {
				d.err = err
				return d
			}
			d.gone = append(d.gone, gone...)
			d.stats.WorkspacesGone += len(gone)
			if graded {
				d.stats.count(res, opts.Count)
				if opts.Count > 1 {
					subs, _ := res.Outcome["graders"].([]schemas.GraderResult)
					rec.Scores = subs
					delete(res.Outcome, "graders")
				} else {
					rec.Scores = nil
				}
				rec.Score = &res
				rec.Provenance.Graders = opts.Names
				rec.Provenance.GraderFiles = opts.Files
			} else {
				d.stats.Skipped++
			}
			recs[i] = rec
		}
		c := schemas.PromptCase{ID: tr.ID, Input: tr.Input, Expected: tr.Expected, Hint: tr.Hint, Metadata: tr.Metadata}
		if opts.Cases != nil && opts.Cases[tr.ID] != nil {
			c = *opts.Cases[tr.ID]
		}
		nr := trials.BuildRecord(c, tr.K, recs)
		d.trials = &nr
		d.stats.TrialsRecords = 1
		d.out, d.err = results.Marshal(nr)
		return d
	}
}

// regradeRecord grades one capture record. graded is false for a record
// whose run failed (it passes through as it is); gone names the record
// when its workspace copy no longer exists.
func regradeRecord(ctx context.Context, rec *schemas.CaptureRecord, opts RegradeOptions, where string) (res schemas.GraderResult, graded bool, gone []goneWorkspace, err error) {
	if rec.Error != nil && rec.Error.Class != schemas.ErrAgentError && !isGraderClass(rec.Error.Class) {
		return res, false, nil, nil
	}
	missing := ""
	if ws := rec.Workspace; ws != nil && ws.Path != "" {
		if _, err := os.Stat(ws.Path); err != nil {
			rebuilt := false
			if opts.Rebuild != nil {
				if dir, cleanup, err := opts.Rebuild(rec); err == nil {
					defer cleanup()
					ws.Path, rebuilt = dir, true
				} else {
					missing = fmt.Sprintf("%s (and it could not be rebuilt: %v)", ws.Path, err)
				}
			}
			if !rebuilt {
				if missing == "" {
					missing = ws.Path
				}
				gone = append(gone, goneWorkspace{where, rec})
			}
		}
	}
	var c *schemas.PromptCase
	if opts.Cases != nil {
		c = opts.Cases[rec.ID]
	}
	res = opts.Grader.Grade(ctx, &graders.Input{Record: rec, Case: c})
	// A combined result carries the signal of a grader of it that died
	// of one (graders.Combine).
	if _, died := res.Error.DiedOfStop(); died && ctx.Err() == nil {
		// The signal that killed the grader may be the stop of the whole
		// run, reaching the grader first: wait a moment for it.
		t := time.NewTimer(stopWait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	if ctx.Err() != nil {
		// Interrupted: the result is not the grader's verdict; leave the
		// record out rather than write a spurious grader error.
		return res, false, nil, ErrInterrupted
	}
	if missing != "" && res.Error != nil {
		res.Error.Message += fmt.Sprintf(" (its workspace copy %s no longer exists)", missing)
	}
	return res, true, gone, nil
}

// count adds one graded record's verdict.
func (s *RegradeStats) count(res schemas.GraderResult, n int) {
	s.Graded++
	errs := 0
	if n > 1 {
		subs, _ := res.Outcome["graders"].([]schemas.GraderResult)
		for _, sub := range subs {
			if sub.Error != nil {
				errs++
				s.addError(sub.Grader+": "+sub.Error.Gist(), 1)
			}
		}
	} else if res.Error != nil {
		errs++
		s.addError(res.Error.Gist(), 1)
	}
	switch {
	case errs > 0:
		s.Errored++
	case res.Pass:
		s.Passed++
	default:
		s.Failed++
	}
}

// spliceScores writes res into a capture record's line, keeping every
// other member's bytes and order.
func spliceScores(j regradeJob, res schemas.GraderResult, n int, names, files json.RawMessage) ([]byte, error) {
	// The old integrity field goes: the line is signed anew as written.
	set := map[string]json.RawMessage{schemas.IntegrityField: nil}
	if n > 1 {
		subs, _ := res.Outcome["graders"].([]schemas.GraderResult)
		delete(res.Outcome, "graders")
		if len(res.Outcome) == 0 {
			res.Outcome = nil
		}
		set["scores"] = mustMarshal(subs)
	} else {
		set["scores"] = nil // drop stale per-grader results
	}
	// A grader error goes under "graderError", a verdict under "score";
	// whichever the line held before goes.
	set["score"], set["graderError"] = nil, nil
	switch score, gerr := schemas.GraderOutcome(&res); {
	case gerr != nil:
		set["graderError"] = mustMarshal(gerr)
	default:
		set["score"] = mustMarshal(score)
	}
	// The outcome is also lifted to the top level, as acp-harness does;
	// a stale one goes.
	set["outcome"] = nil
	if res.Error == nil && len(res.Outcome) > 0 {
		set["outcome"] = mustMarshal(res.Outcome)
	}
	prov := json.RawMessage(`{}`)
	if raw, ok := rawField(j.raw, "provenance"); ok {
		prov = raw
	}
	newProv, err := spliceObject(prov, map[string]json.RawMessage{"graders": names, "graderFiles": files})
	if err != nil {
		return nil, &schemas.InputError{File: j.file, Line: j.line, Field: "provenance", Msg: err.Error()}
	}
	set["provenance"] = newProv
	out, err := spliceObject(j.raw, set)
	if err != nil {
		return nil, &schemas.InputError{File: j.file, Line: j.line, Msg: err.Error()}
	}
	return out, nil
}

func isGraderClass(c string) bool {
	return c == schemas.ErrGraderError || c == schemas.ErrGraderTimeout || c == schemas.ErrGraderInvalid
}

func mustMarshal(v any) json.RawMessage {
	b, err := results.Marshal(v)
	if err != nil {
		panic(err) // grader results are plain data
	}
	return b
}

// rawField returns the raw value of a top-level key of a JSON object.
func rawField(obj []byte, key string) (json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return nil, false
	}
	v, ok := m[key]
	return v, ok && string(v) != "null"
}

// spliceObject rewrites a JSON object keeping every other member's bytes
// and order: keys in set are replaced in place (or appended), a nil value
// removes the key.
func spliceObject(obj []byte, set map[string]json.RawMessage) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	seen := map[string]bool{}
	write := func(k string, v json.RawMessage) {
		if !first {
			b.WriteByte(',')
		}
		first = false
		kb, _ := results.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(v)
	}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := kt.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if nv, ok := set[k]; ok {
			seen[k] = true
			if nv != nil {
				write(k, nv)
			}
			continue
		}
		write(k, v)
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if !seen[k] && set[k] != nil {
			write(k, set[k])
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// stopWait is how long a grader that died of a stop signal waits for the
// run's own stop before its death counts as a grader error.
const stopWait = 2 * time.Second
