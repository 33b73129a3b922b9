package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/spf13/pflag"

	"harness/graders"
	"harness/internal/jsonl"
	"harness/schemas"
)

// gradeFlags are the options of harness grade.
type gradeFlags struct {
	graders     []string
	output      string
	force       bool
	sample      int
	seed        uint64
	concurrency int
	prompts     string
	timeout     string
	threshold   float64
	quiet       bool
	// single-shot mode
	agentOutput string
	input       string
	expected    string
	hint        string
}

func (f *gradeFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringArrayVarP(&f.graders, "grader", "g", nil, "grader: an executable, a .js/.mjs/.cjs/.ts module, or a .json/.yaml config (repeatable)")
	fs.StringVarP(&f.output, "output", "o", "", "write the graded records here (default stdout; .zst/.gz compress)")
	fs.BoolVar(&f.force, "force", false, "overwrite an existing output file")
	fs.IntVar(&f.sample, "sample", 0, "grade only N records chosen at random (with --seed)")
	fs.Uint64Var(&f.seed, "seed", 1, "random seed for --sample")
	fs.IntVarP(&f.concurrency, "concurrency", "j", 4, "records graded at once")
	fs.StringVar(&f.prompts, "prompts", "", "prompts file (JSONL) joined by id to supply expected, hint and reference")
	fs.StringVarP(&f.timeout, "timeout", "t", "", "time limit per grading call (default 60s; 5s for JavaScript)")
	fs.Float64Var(&f.threshold, "threshold", graders.DefaultThreshold, "pass threshold of composite graders and bare scores")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no summary on stderr")
	fs.StringVar(&f.agentOutput, "agent-output", "", "single shot: grade this agent output instead of stored records")
	fs.StringVar(&f.input, "input", "", "single shot: the prompt the output answers")
	fs.StringVar(&f.expected, "expected", "", "single shot: the expected answer")
	fs.StringVar(&f.hint, "hint", "", "single shot: a grading hint")
}

func newGradeCmd() *command {
	f := &gradeFlags{}
	c := &command{
		name:  "grade",
		usage: "grade RESULTS... -g GRADER [-g GRADER...] [-o OUT] [flags]",
		short: "(re)grade stored trajectories without running the agent",
		long: `Grade reads capture records (JSONL, .zst or .gz; "-" is stdin) and grades
each one again with the given graders, without running the agent. Every
record is written back whole with its trajectory untouched: only score,
scores and provenance.graders change. With one grader, score is its result;
with several, scores holds each result and score combines them (pass only
if all pass, score the mean). Records whose run failed (agent crash,
timeout...) are passed through ungraded, as capture does.

A grader is an executable (acp-harness stdin/stdout JSON protocol), a
JavaScript or TypeScript module exporting grade, or a JSON/YAML config
(llm-judge, agentv script command, JavaScript script, composite with
weights). See docs/graders.md.

Single shot: with --agent-output and no RESULTS, grade one synthetic record
and print the result (exit 1 when it fails), like agentv's "eval assert".

Examples:
  harness grade results.jsonl -g ./grader.py -o regraded.jsonl
  harness grade results.jsonl.zst -g judge.yaml --sample 5 --seed 7
  harness grade run1.jsonl run2.jsonl -g format.yaml -g quality.yaml -j 8 -o out.jsonl.zst
  harness grade results.jsonl -g ./check.ts --prompts prompts.jsonl -o out.jsonl
  harness grade -g ./grader.py --agent-output "The answer is 42" --input "15+27?" --expected 42`,
		flags: pflag.NewFlagSet("grade", pflag.ContinueOnError),
	}
	f.addFlags(c.flags)
	c.run = func(ctx context.Context, e *env, args, _ []string) error {
		return runGrade(ctx, e, c.flags, f, args)
	}
	return c
}

func runGrade(ctx context.Context, e *env, fs *pflag.FlagSet, f *gradeFlags, args []string) error {
	single := fs.Changed("agent-output")
	if len(f.graders) == 0 {
		return usageErrorf("no grader: give one or more -g GRADER")
	}
	if single && len(args) > 0 {
		return usageErrorf("--agent-output grades one synthetic record; do not also give RESULTS files")
	}
	if !single && len(args) == 0 {
		return usageErrorf("no RESULTS files (give capture output files, or - for stdin; or --agent-output TEXT for a single shot)")
	}
	if !single {
		for _, name := range []string{"input", "expected", "hint"} {
			if fs.Changed(name) {
				return usageErrorf("--%s only applies with --agent-output", name)
			}
		}
	}
	if f.concurrency < 1 {
		return usageErrorf("-j must be at least 1")
	}
	if f.sample < 0 {
		return usageErrorf("--sample must not be negative")
	}
	if f.threshold < 0 || f.threshold > 1 {
		return usageErrorf("--threshold must be between 0 and 1")
	}
	opts := graders.Options{Getenv: e.getenv}
	if wd, err := os.Getwd(); err == nil {
		opts.Dir = wd
	}
	if f.timeout != "" {
		d, err := schemas.ParseDuration(f.timeout)
		if err != nil || d <= 0 {
			return usageErrorf("--timeout %q: want a positive duration such as 30s", f.timeout)
		}
		opts.Timeout = d
	}
	if fs.Changed("threshold") {
		th := f.threshold
		opts.Threshold = &th
	}
	var gs []graders.Grader
	var names []string
	for _, spec := range f.graders {
		g, err := graders.Load(spec, opts)
		if err != nil {
			return inputError(err)
		}
		gs = append(gs, g)
		names = append(names, g.Name())
	}
	if single {
		return gradeSingle(ctx, e, f, gs)
	}
	return gradeFiles(ctx, e, f, args, gs, names)
}

// gradeSingle grades one synthetic record and prints the result.
func gradeSingle(ctx context.Context, e *env, f *gradeFlags, gs []graders.Grader) error {
	if f.output != "" && f.output != "-" {
		return usageErrorf("-o does not apply to a single shot; the result goes to stdout")
	}
	rec := &schemas.CaptureRecord{
		ID:       "single",
		Trial:    1,
		Input:    schemas.SingleTurn(f.input),
		Output:   f.agentOutput,
		Expected: f.expected,
		Hint:     f.hint,
		Trajectory: []schemas.Step{{Type: schemas.StepMessage, StepID: "single-t1-s1",
			Content: mustMarshal(f.agentOutput)}},
		StopReason: "end_turn",
		Metadata:   map[string]any{},
		Provenance: provenance(),
	}
	r := graders.Many(gs).Grade(ctx, &graders.Input{Record: rec})
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s\n", b)
	switch {
	case r.Error != nil:
		return withCode(exitInfraErrors, fmt.Errorf("grader error (%s): %s", r.Error.Class, r.Error.Message))
	case !r.Pass:
		return withCode(exitGateFailed, errors.New(""))
	}
	return nil
}

func mustMarshal(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// errGradeInterrupted marks a record whose grading was cut short.
var errGradeInterrupted = errors.New("interrupted")

// gradeJob is one record to grade, in input order.
type gradeJob struct {
	seq  int
	file string
	line int
	raw  []byte
}

// gradeDone is a graded record ready to write.
type gradeDone struct {
	seq    int
	out    []byte
	graded bool
	pass   bool
	errors int
	err    error
}

// gradeFiles re-grades stored records, streaming them: a first pass checks
// every line (and counts records for --sample) so bad input stops the
// command before any output is written; the second pass grades.
func gradeFiles(ctx context.Context, e *env, f *gradeFlags, files []string, gs []graders.Grader, names []string) error {
	stdinUses := 0
	for _, name := range files {
		if name == "-" {
			stdinUses++
		}
		if f.output != "" && f.output != "-" && sameFile(name, f.output) {
			return usageErrorf("output %s is also an input; write to a new file", f.output)
		}
	}
	if stdinUses > 1 {
		return usageErrorf("stdin (-) can be read only once")
	}
	if stdinUses > 0 && f.sample > 0 {
		return usageErrorf("--sample needs files, not stdin")
	}
	total := 0
	for _, name := range files {
		if name == "-" {
			continue
		}
		n, err := checkRecords(e, name)
		if err != nil {
			return err
		}
		total += n
	}
	var chosen map[int]bool
	if f.sample > 0 && f.sample < total {
		rng := rand.New(rand.NewPCG(f.seed, 0x6861726e657373))
		chosen = map[int]bool{}
		for _, i := range rng.Perm(total)[:f.sample] {
			chosen[i] = true
		}
	}
	var cases map[string]*schemas.PromptCase
	if f.prompts != "" {
		r, err := jsonl.Open(f.prompts, e.stdin)
		if err != nil {
			return inputError(fmt.Errorf("--prompts: %w", err))
		}
		list, err := schemas.ReadPrompts(f.prompts, r)
		r.Close()
		if err != nil {
			return inputError(err)
		}
		cases = make(map[string]*schemas.PromptCase, len(list))
		for i := range list {
			cases[list[i].ID] = &list[i]
		}
	}

	out, closeOut, err := openGradeOutput(e, f)
	if err != nil {
		return err
	}
	g := graders.Many(gs)
	namesJSON := mustMarshal(names)

	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	window := 2 * f.concurrency
	slots := make(chan struct{}, window)
	jobs := make(chan gradeJob)
	done := make(chan gradeDone, window)
	var readErr error
	go func() {
		defer close(jobs)
		index, seq := 0, 0
		for _, name := range files {
			r, err := jsonl.Open(name, e.stdin)
			if err != nil {
				readErr = inputError(err)
				return
			}
			err = schemas.EachLine(r, func(lineNo int, line []byte) error {
				i := index
				index++
				if chosen != nil && !chosen[i] {
					return nil
				}
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					return ctx.Err()
				}
				jobs <- gradeJob{seq: seq, file: name, line: lineNo, raw: bytes.Clone(line)}
				seq++
				return nil
			})
			r.Close()
			if err != nil {
				if ctx.Err() == nil {
					readErr = inputError(fmt.Errorf("%s: %w", name, err))
				}
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range f.concurrency {
		wg.Go(func() {
			for j := range jobs {
				done <- gradeOne(ctx, j, g, len(gs), cases, namesJSON)
			}
		})
	}
	go func() { wg.Wait(); close(done) }()

	// Write in input order.
	pending := map[int]gradeDone{}
	next := 0
	var graded, passed, failed, errored, skipped int
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
			if errors.Is(p.err, errGradeInterrupted) {
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
			if err := out.WriteRaw(p.out); err != nil {
				firstErr = fmt.Errorf("output: %w", err)
				cancel()
				continue
			}
			switch {
			case !p.graded:
				skipped++
			case p.errors > 0:
				graded++
				errored++
			case p.pass:
				graded++
				passed++
			default:
				graded++
				failed++
			}
		}
	}
	if err := closeOut(); err != nil && firstErr == nil {
		firstErr = fmt.Errorf("output: %w", err)
	}
	if readErr != nil && firstErr == nil {
		firstErr = readErr
	}
	if firstErr != nil {
		return firstErr
	}
	if !f.quiet {
		msg := fmt.Sprintf("graded %d records: %d passed, %d failed, %d grader errors", graded, passed, failed, errored)
		if skipped > 0 {
			msg += fmt.Sprintf("; %d not graded (the run itself failed)", skipped)
		}
		if chosen != nil {
			msg += fmt.Sprintf(" (sample of %d from %d, seed %d)", f.sample, total, f.seed)
		}
		fmt.Fprintln(e.stderr, "harness grade: "+msg)
	}
	if parent.Err() != nil {
		return withCode(exitInterrupted, errors.New("interrupted; the output holds every finished record"))
	}
	if errored > 0 {
		return withCode(exitInfraErrors, fmt.Errorf("%d of %d records had grader errors", errored, graded))
	}
	return nil
}

// checkRecords validates every line of a results file and counts them.
func checkRecords(e *env, name string) (int, error) {
	r, err := jsonl.Open(name, e.stdin)
	if err != nil {
		return 0, inputError(err)
	}
	defer r.Close()
	n := 0
	err = schemas.EachLine(r, func(lineNo int, line []byte) error {
		if _, err := parseRecord(name, lineNo, line); err != nil {
			return err
		}
		n++
		return nil
	})
	if err != nil {
		var ie *schemas.InputError
		if errors.As(err, &ie) {
			return 0, inputError(err)
		}
		return 0, inputError(fmt.Errorf("%s: %w", name, err))
	}
	if n == 0 {
		return 0, inputError(&schemas.InputError{File: name, Msg: "no records (the file is empty)"})
	}
	return n, nil
}

// parseRecord decodes one capture record line; errors name file and line.
func parseRecord(name string, lineNo int, line []byte) (*schemas.CaptureRecord, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(line, &probe); err != nil || probe == nil {
		msg := "not a JSON object"
		if err != nil {
			msg += ": " + err.Error()
		}
		return nil, &schemas.InputError{File: name, Line: lineNo, Msg: msg}
	}
	var rec schemas.CaptureRecord
	if err := json.Unmarshal(line, &rec); err != nil {
		field := ""
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field = te.Field
		}
		return nil, &schemas.InputError{File: name, Line: lineNo, Field: field, Msg: "not a capture record: " + err.Error()}
	}
	if rec.ID == "" {
		return nil, &schemas.InputError{File: name, Line: lineNo, Field: "id", Msg: "missing (is this a capture results file?)"}
	}
	return &rec, nil
}

// gradeOne grades one record and splices the results into its line.
func gradeOne(ctx context.Context, j gradeJob, g graders.Grader, n int, cases map[string]*schemas.PromptCase, names json.RawMessage) gradeDone {
	d := gradeDone{seq: j.seq}
	rec, err := parseRecord(j.file, j.line, j.raw)
	if err != nil {
		d.err = inputError(err)
		return d
	}
	if rec.Error != nil && rec.Error.Class != schemas.ErrAgentError && !isGraderClass(rec.Error.Class) {
		d.out = j.raw
		return d
	}
	var c *schemas.PromptCase
	if cases != nil {
		c = cases[rec.ID]
	}
	res := g.Grade(ctx, &graders.Input{Record: rec, Case: c})
	if ctx.Err() != nil {
		// Interrupted: the result is not the grader's verdict; leave the
		// record out rather than write a spurious grader error.
		d.err = errGradeInterrupted
		return d
	}
	d.graded = true
	d.pass = res.Pass
	set := map[string]json.RawMessage{}
	if n > 1 {
		subs, _ := res.Outcome["graders"].([]schemas.GraderResult)
		for _, s := range subs {
			if s.Error != nil {
				d.errors++
			}
		}
		delete(res.Outcome, "graders")
		if len(res.Outcome) == 0 {
			res.Outcome = nil
		}
		set["scores"] = mustMarshalNoEscape(subs)
	} else {
		if res.Error != nil {
			d.errors++
		}
		set["scores"] = nil // drop stale per-grader results
	}
	set["score"] = mustMarshalNoEscape(res)
	prov := json.RawMessage(`{}`)
	if raw, ok := rawField(j.raw, "provenance"); ok {
		prov = raw
	}
	newProv, err := spliceObject(prov, map[string]json.RawMessage{"graders": names})
	if err != nil {
		d.err = inputError(&schemas.InputError{File: j.file, Line: j.line, Field: "provenance", Msg: err.Error()})
		return d
	}
	set["provenance"] = newProv
	out, err := spliceObject(j.raw, set)
	if err != nil {
		d.err = inputError(&schemas.InputError{File: j.file, Line: j.line, Msg: err.Error()})
		return d
	}
	d.out = out
	return d
}

func isGraderClass(c string) bool {
	return c == schemas.ErrGraderError || c == schemas.ErrGraderTimeout || c == schemas.ErrGraderInvalid
}

func mustMarshalNoEscape(v any) json.RawMessage {
	b, err := jsonl.Marshal(v)
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
		kb, _ := jsonl.Marshal(k)
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

// openGradeOutput opens -o (a new file, or --force) or stdout.
func openGradeOutput(e *env, f *gradeFlags) (*jsonl.Writer, func() error, error) {
	if f.output == "" || f.output == "-" {
		w, err := jsonl.NewWriter("", e.stdout)
		if err != nil {
			return nil, nil, err
		}
		return w, w.Close, nil
	}
	flags := os.O_CREATE | os.O_WRONLY | os.O_EXCL
	if f.force {
		flags = os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	}
	file, err := os.OpenFile(f.output, flags, 0o644)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, nil, usageErrorf("output %s already exists; use --force to overwrite it", f.output)
		}
		return nil, nil, inputError(fmt.Errorf("output: %w", err))
	}
	w, err := jsonl.NewWriter(f.output, file)
	if err != nil {
		file.Close()
		return nil, nil, err
	}
	return w, func() error {
		err := w.Close()
		if cerr := file.Close(); err == nil {
			err = cerr
		}
		return err
	}, nil
}

// sameFile reports whether two paths name the same existing file.
func sameFile(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	if err1 == nil && err2 == nil {
		return os.SameFile(sa, sb)
	}
	aa, _ := filepath.Abs(a)
	bb, _ := filepath.Abs(b)
	return aa == bb
}
