package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"harness/results"
	"harness/schemas"
	"harness/trials"
)

// mergeFlags are the flags of harness merge.
type mergeFlags struct {
	output       string
	k            int
	prompts      string
	allowMissing bool
	force        bool
	summaryPath  string
	seed         uint64
	resamples    int
	quiet        bool
}

func newMergeCmd() *command {
	var f mergeFlags
	c := &command{
		name:  "merge",
		usage: "merge SHARDS... -o OUT [-k N] [--prompts FILE] [flags]",
		short: "join the shard outputs of a distributed run, checking that every unit is there once",
		long: `merge joins the outputs of runs made with --shard I/N (capture records,
one per unit: a case and a trial; .zst and .gz files are read by name) and
checks that every unit is there exactly once. A unit in two files, or twice
in one, is an error naming the unit and the files. Within one file a record
with an error followed by another record of the same unit (a shard continued
with --resume or --retry-errors) counts as the later one.

With --prompts FILE merge knows the whole set of units (every case of the
file, trials 1..k) and reports the missing ones; without it, every case seen
must have trials 1..k. k is -k, or else the largest trial seen. Missing units
are an error unless --allow-missing, which writes what there is and lists the
gaps on stderr.

The output is the merged capture records in case and trial order, or with
-k N (which needs --prompts) what harness trials writes for the same run:
one trials record per case with n, c, pass@k and pass^k, then the summary
(or --summary FILE). The metrics equal those of an unsharded run.

Examples:
  harness merge shard-*.jsonl.zst -o all.jsonl.zst
  harness merge shard-*.jsonl.zst -k 5 --prompts prompts.jsonl -o trials.jsonl
  harness merge results/*.jsonl --prompts prompts.jsonl --allow-missing -o partial.jsonl`,
		flags: pflag.NewFlagSet("merge", pflag.ContinueOnError),
	}
	fs := c.flags
	fs.StringVarP(&f.output, "output", "o", "", "write the merged records to `file` (- for stdout); a .zst or .gz suffix compresses")
	fs.IntVarP(&f.k, "k", "k", 0, "write trials records for `n` trials per case, and the summary (needs --prompts)")
	fs.StringVar(&f.prompts, "prompts", "", "the prompts `file` of the run: the full set of cases, in order")
	fs.BoolVar(&f.allowMissing, "allow-missing", false, "write what there is when units are missing, and list them")
	fs.BoolVar(&f.force, "force", false, "overwrite an existing output file")
	fs.StringVar(&f.summaryPath, "summary", "", "with -k, write the summary (JSON) to `file` instead of as the last output line")
	fs.Uint64Var(&f.seed, "seed", trials.DefaultSeed, "seed of the bootstrap intervals")
	fs.IntVar(&f.resamples, "resamples", trials.DefaultResamples, "bootstrap resamples")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "print nothing but errors on stderr")
	c.run = func(ctx context.Context, e *env, args, _ []string) error {
		return f.run(e, args)
	}
	return c
}

// mergeKey names one unit.
type mergeKey struct {
	id    string
	trial int
}

// mergeLoc is where a unit's record is: its file and line, and its place
// in the spool.
type mergeLoc struct {
	file  int
	line  int
	off   int64
	size  int
	class string // the record's error class, "" for none
}

// maxProblems bounds the problems listed in one error.
const maxProblems = 20

// problems collects input problems and lists them in one error.
type problems struct {
	list []string
	n    int
}

func (p *problems) addf(format string, args ...any) {
	p.n++
	if len(p.list) < maxProblems {
		p.list = append(p.list, fmt.Sprintf(format, args...))
	}
}

func (p *problems) err(what string) error {
	if p.n == 0 {
		return nil
	}
	msg := fmt.Sprintf("%d %s:\n  %s", p.n, what, strings.Join(p.list, "\n  "))
	if p.n > len(p.list) {
		msg += fmt.Sprintf("\n  ... and %d more", p.n-len(p.list))
	}
	return inputError(errors.New(msg))
}

// merger holds the state of one merge: the shard files, the units found,
// and the spool their records were copied to (uncompressed, so each can be
// read back by offset while memory stays flat in the number of records).
type merger struct {
	files  []string
	units  map[mergeKey]*mergeLoc
	order  []string // case ids in order of first appearance
	seen   map[string]bool
	spool  *os.File
	size   int64
	maxT   int
	stderr io.Writer
	quiet  bool
}

func (f *mergeFlags) run(e *env, args []string) error {
	if len(args) == 0 {
		return usageErrorf("no shard files: name the outputs of the --shard runs")
	}
	if f.output == "" {
		return usageErrorf("no output: use -o FILE (or -o - for stdout)")
	}
	if f.k < 0 {
		return usageErrorf("-k must be at least 1")
	}
	if f.k > 0 && f.prompts == "" {
		return usageErrorf("-k needs --prompts FILE: a trials record carries its case's input, expected and metadata")
	}
	if f.summaryPath != "" && f.k == 0 {
		return usageErrorf("--summary needs -k")
	}
	if f.output != "-" {
		if st, err := os.Stat(f.output); err == nil && st.Mode().IsRegular() && st.Size() > 0 && !f.force {
			return usageErrorf("output %s already exists; use --force to overwrite it", f.output)
		}
		for _, a := range args {
			if same(a, f.output) {
				return usageErrorf("output %s is also a shard input", f.output)
			}
		}
	}
	if f.summaryPath != "" && !f.force {
		if _, err := os.Stat(f.summaryPath); err == nil {
			return usageErrorf("--summary %s already exists; use --force to overwrite it", f.summaryPath)
		}
	}
	var cases []schemas.PromptCase
	if f.prompts != "" {
		r, err := results.Open(f.prompts, e.stdin)
		if err != nil {
			return inputError(fmt.Errorf("--prompts: %w", err))
		}
		cases, err = schemas.ReadPrompts(f.prompts, r)
		r.Close()
		if err != nil {
			return inputError(err)
		}
	}
	spool, err := os.CreateTemp("", "harness-merge-*.jsonl")
	if err != nil {
		return fmt.Errorf("merge: spool: %w", err)
	}
	defer func() {
		spool.Close()
		os.Remove(spool.Name())
	}()
	m := &merger{files: args, units: map[mergeKey]*mergeLoc{}, seen: map[string]bool{}, spool: spool, stderr: e.stderr, quiet: f.quiet}
	var bad problems
	for i, name := range args {
		if err := m.read(i, name, e.stdin, &bad); err != nil {
			return err
		}
	}
	if err := bad.err("problems in the shard files"); err != nil {
		return err
	}
	if len(m.units) == 0 {
		return inputError(fmt.Errorf("no records in %s: nothing to merge", plural(len(args), "file")))
	}

	// The units the run should have.
	k := f.k
	if k == 0 {
		k = max(m.maxT, 1)
	}
	ids := m.order
	byID := map[string]*schemas.PromptCase{}
	if cases != nil {
		ids = ids[:0:0]
		for i := range cases {
			ids = append(ids, cases[i].ID)
			byID[cases[i].ID] = &cases[i]
		}
		for _, id := range m.order {
			if byID[id] == nil {
				loc := m.first(id)
				bad.addf("%s:%d: case %q is not in %s (were the shards run on another prompts file?)", args[loc.file], loc.line, id, f.prompts)
			}
		}
	}
	for _, key := range sortedUnitKeys(m.units) {
		if loc := m.units[key]; key.trial > k {
			bad.addf("%s:%d: case %q trial %d is beyond -k %d", args[loc.file], loc.line, key.id, key.trial, k)
		}
	}
	if err := bad.err("records that do not belong to this run"); err != nil {
		return err
	}
	var gaps problems
	for _, id := range ids {
		for t := 1; t <= k; t++ {
			loc := m.units[mergeKey{id, t}]
			switch {
			case loc == nil:
				gaps.addf("case %q trial %d: no record", id, t)
			case loc.class == schemas.ErrInterrupted:
				gaps.addf("case %q trial %d: only an interrupted record (%s:%d); continue that shard with --resume", id, t, args[loc.file], loc.line)
			}
		}
	}
	if gaps.n > 0 {
		if !f.allowMissing {
			return gaps.err(fmt.Sprintf("of %d units missing (write what there is with --allow-missing)", len(ids)*k))
		}
		if !f.quiet {
			fmt.Fprintf(e.stderr, "harness merge: %d of %d units missing:\n  %s\n", gaps.n, len(ids)*k, strings.Join(gaps.list, "\n  "))
			if gaps.n > len(gaps.list) {
				fmt.Fprintf(e.stderr, "  ... and %d more\n", gaps.n-len(gaps.list))
			}
		}
	}

	w, commit, abort, err := openMergeOutput(e, f.output, f.force)
	if err != nil {
		return err
	}
	if f.k > 0 {
		err = m.writeTrials(w, cases, k, f, e)
	} else {
		err = m.writeCaptures(w, ids, k)
	}
	if err != nil {
		abort()
		return err
	}
	if err := commit(); err != nil {
		return fmt.Errorf("merge: output: %w", err)
	}
	if !f.quiet {
		fmt.Fprintf(e.stderr, "harness merge: %s from %s, %s, k=%d\n", plural(len(m.units), "record"), plural(len(args), "file"), plural(len(ids), "case"), k)
	}
	return nil
}

// same reports whether two names are the same file.
func same(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// read copies the records of one shard file to the spool and indexes them.
func (m *merger) read(fileIdx int, name string, stdin io.Reader, bad *problems) error {
	r, err := results.Open(name, stdin)
	if err != nil {
		return inputError(fmt.Errorf("shard %s: %w", name, err))
	}
	defer r.Close()
	records := 0
	err = schemas.EachLine(r, func(lineNo int, line []byte) error {
		n, err := m.addLine(fileIdx, name, lineNo, line, bad)
		records += n
		return err
	})
	if err != nil {
		var ee *exitError
		var ie *schemas.InputError
		if errors.As(err, &ee) || errors.As(err, &ie) {
			return inputError(err)
		}
		return inputError(fmt.Errorf("shard %s: %w", name, err))
	}
	if records == 0 && !m.quiet {
		fmt.Fprintf(m.stderr, "harness merge: %s holds no records\n", name)
	}
	return nil
}

// addLine takes one line of a shard file: a capture record, or a trials
// record whose trials each count as the capture record they hold (a
// trials summary is skipped: merge -k writes a new one). It returns how
// many records it added.
func (m *merger) addLine(fileIdx int, name string, lineNo int, line []byte, bad *problems) (int, error) {
	rl, err := schemas.ParseResultLine(line)
	if err == nil && rl.Kind == schemas.KindSummary {
		return 0, nil
	}
	if err == nil && rl.Kind == schemas.KindTrials {
		n := 0
		for i := range rl.Trials.Trials {
			rec := rl.Trials.Trials[i].Capture()
			rec.ID = rl.Trials.ID
			b, err := results.Marshal(rec)
			if err != nil {
				return n, err
			}
			added, err := m.addCapture(fileIdx, name, lineNo, b, bad)
			n += added
			if err != nil {
				return n, err
			}
		}
		return n, nil
	}
	return m.addCapture(fileIdx, name, lineNo, line, bad)
}

// addCapture takes one capture record line.
func (m *merger) addCapture(fileIdx int, name string, lineNo int, line []byte, bad *problems) (int, error) {
	var probe struct {
		ID    *string         `json:"id"`
		Trial json.RawMessage `json:"trial"`
		Error *struct {
			Class string `json:"class"`
		} `json:"error"`
	}
	if err := json.Unmarshal(line, &probe); err != nil {
		// A crash can cut a record short; a shard continued with
		// --resume reran it, and a unit still missing is reported.
		if !m.quiet {
			fmt.Fprintf(m.stderr, "harness merge: %s:%d: skipped a line that is not JSON (a record cut short by a crash?)\n", name, lineNo)
		}
		return 0, nil
	}
	if probe.ID == nil || *probe.ID == "" {
		bad.addf("%s:%d: field \"id\": missing or empty", name, lineNo)
		return 0, nil
	}
	trial := 1
	if len(probe.Trial) > 0 && string(probe.Trial) != "null" {
		if err := json.Unmarshal(probe.Trial, &trial); err != nil || trial < 0 {
			bad.addf("%s:%d: field \"trial\": want a positive integer, got %s", name, lineNo, probe.Trial)
			return 0, nil
		}
		trial = max(trial, 1)
	}
	loc := &mergeLoc{file: fileIdx, line: lineNo, off: m.size, size: len(line)}
	if probe.Error != nil {
		loc.class = probe.Error.Class
		if loc.class == "" {
			loc.class = trials.Unclassified
		}
	}
	key := mergeKey{*probe.ID, trial}
	if prev := m.units[key]; prev != nil {
		switch {
		case prev.file != fileIdx:
			bad.addf("case %q trial %d is in two shards: %s:%d and %s:%d", key.id, key.trial, m.files[prev.file], prev.line, name, lineNo)
			return 0, nil
		case prev.class == "":
			bad.addf("case %q trial %d is twice in %s: lines %d and %d", key.id, key.trial, name, prev.line, lineNo)
			return 0, nil
		}
		// An errored record rerun later in the same file (--resume,
		// --retry-errors): the later one counts.
	}
	if _, err := m.spool.Write(append(line, '\n')); err != nil {
		return 0, fmt.Errorf("merge: spool: %w", err)
	}
	m.size += int64(len(line) + 1)
	m.units[key] = loc
	m.maxT = max(m.maxT, trial)
	if !m.seen[key.id] {
		m.seen[key.id] = true
		m.order = append(m.order, key.id)
	}
	return 1, nil
}

// first returns the first record of case id in file and line order.
func (m *merger) first(id string) *mergeLoc {
	var best *mergeLoc
	for key, loc := range m.units {
		if key.id == id && (best == nil || loc.file < best.file || loc.file == best.file && loc.line < best.line) {
			best = loc
		}
	}
	return best
}

// record reads a unit's line back from the spool.
func (m *merger) record(loc *mergeLoc) ([]byte, error) {
	b := make([]byte, loc.size)
	if _, err := m.spool.ReadAt(b, loc.off); err != nil {
		return nil, fmt.Errorf("merge: spool: %w", err)
	}
	return b, nil
}

// writeCaptures writes the records as they are, in case and trial order.
func (m *merger) writeCaptures(w *results.Writer, ids []string, k int) error {
	for _, id := range ids {
		for t := 1; t <= k; t++ {
			loc := m.units[mergeKey{id, t}]
			if loc == nil {
				continue
			}
			b, err := m.record(loc)
			if err != nil {
				return err
			}
			if err := w.WriteRaw(b); err != nil {
				return fmt.Errorf("merge: output: %w", err)
			}
		}
	}
	return nil
}

// writeTrials writes one trials record per case, built the way harness
// trials builds them, then the summary.
func (m *merger) writeTrials(w *results.Writer, cases []schemas.PromptCase, k int, f *mergeFlags, e *env) error {
	sum := trials.NewSummary(k)
	for i := range cases {
		c := &cases[i]
		var recs []schemas.CaptureRecord
		for t := 1; t <= k; t++ {
			loc := m.units[mergeKey{c.ID, t}]
			if loc == nil || loc.class == schemas.ErrInterrupted {
				continue
			}
			b, err := m.record(loc)
			if err != nil {
				return err
			}
			var rec schemas.CaptureRecord
			if err := json.Unmarshal(b, &rec); err != nil {
				return inputError(&schemas.InputError{File: m.files[loc.file], Line: loc.line, Msg: "not a capture record: " + err.Error()})
			}
			recs = append(recs, rec)
		}
		tr := trials.BuildRecord(*c, k, recs)
		sum.Add(tr)
		if err := w.Write(tr); err != nil {
			return fmt.Errorf("merge: output: %w", err)
		}
	}
	res := sum.Result(f.seed, f.resamples)
	if f.summaryPath != "" {
		err := results.WriteFile(f.summaryPath, nil, true, func(w io.Writer) error { return writePrettyJSON(w, res) })
		if err != nil {
			return fmt.Errorf("merge: summary: %w", err)
		}
	} else if err := w.Write(res); err != nil {
		return fmt.Errorf("merge: output: %w", err)
	}
	if !f.quiet {
		trials.WriteSummaryTable(e.stderr, res)
	}
	return nil
}

// openMergeOutput opens the output: stdout, or a temporary file beside
// OUT that commit renames into place, so a failed merge leaves OUT as it
// was.
func openMergeOutput(e *env, name string, force bool) (w *results.Writer, commit, abort func() error, err error) {
	f, err := results.CreateFile(name, e.stdout, force)
	if err != nil {
		return nil, nil, nil, outputOpenError(err)
	}
	w, err = results.NewWriter(name, f)
	if err != nil {
		f.Abort()
		return nil, nil, nil, fmt.Errorf("merge: output: %w", err)
	}
	commit = func() error {
		if err := w.Close(); err != nil {
			f.Abort()
			return err
		}
		return f.Commit()
	}
	abort = func() error {
		f.Abort()
		return nil
	}
	return w, commit, abort, nil
}

// sortedUnitKeys is for stable listings in tests and messages.
func sortedUnitKeys(m map[mergeKey]*mergeLoc) []mergeKey {
	keys := make([]mergeKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].id != keys[j].id {
			return keys[i].id < keys[j].id
		}
		return keys[i].trial < keys[j].trial
	})
	return keys
}
