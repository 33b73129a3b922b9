package evaluation

import (
	"fmt"

	"harness/results"
	"harness/schemas"
	"harness/trials"
)

// ShardOptions configure ReadShards.
type ShardOptions struct {
	// Files are the outputs of the shards of one run, in order.
	Files []Source
	// Cases, when set, are the whole set of cases of the run (its prompts
	// file, named PromptsName in messages), in order; without them the
	// cases are those seen in the files.
	Cases       []schemas.PromptCase
	PromptsName string
	// K is the trials per case; 0 takes the largest trial seen.
	K int
	// Key, when set, makes every line one harness must have signed.
	Key *results.Key
	// Skipped, when set, is told of each line that is not JSON (a record
	// cut short by a crash).
	Skipped func(file string, line int)
	// Empty, when set, is told of each file that holds no records.
	Empty func(file string)
}

// MergeInputError is a problem in the files a merge reads. Foreign is set
// when they hold lines harness did not write (their records cannot be
// trusted).
type MergeInputError struct {
	Foreign bool
	Err     error
}

func (e *MergeInputError) Error() string { return e.Err.Error() }
func (e *MergeInputError) Unwrap() error { return e.Err }

// StrayRecordsError lists the records that do not belong to the run:
// cases that are not in its prompts file (each "FILE:LINE: case "X" is not
// in PROMPTS ...") and trials beyond its K (each "FILE:LINE: case "X"
// trial T").
type StrayRecordsError struct {
	NotInCases []string
	Beyond     []string
	K          int
}

// Problems lists every stray record, worded with beyond, which says how
// a trial past K is beyond it ("beyond trial 3").
func (e *StrayRecordsError) Problems(beyond func(k int) string) *results.Problems {
	var p results.Problems
	for _, s := range e.NotInCases {
		p.Addf("%s", s)
	}
	for _, b := range e.Beyond {
		p.Addf("%s is %s", b, beyond(e.K))
	}
	return &p
}

func (e *StrayRecordsError) Error() string {
	p := e.Problems(func(k int) string { return fmt.Sprintf("beyond trial %d", k) })
	return p.Err("records that do not belong to this run").Error()
}

// Shards are the records of the shard files of one run, read and checked
// by ReadShards and ready to be written as one output.
type Shards struct {
	m *results.Merger
	// IDs are the cases of the run in order; K its trials per case.
	IDs []string
	K   int
	// Cases are the prompt cases (nil when none were given).
	Cases []schemas.PromptCase
	// Gaps are the units with no record, or only an interrupted one.
	Gaps []results.Gap
	// Files is how many files were read.
	Files int
}

// ReadShards reads the shard files of a run and checks that every unit
// (case and trial) in them is there once and belongs to the run. Bad
// input comes as a *MergeInputError or a *StrayRecordsError; missing
// units are not an error but listed in Gaps. Close the Shards when done.
func ReadShards(opts ShardOptions) (*Shards, error) {
	names := make([]string, len(opts.Files))
	for i, f := range opts.Files {
		names[i] = f.Name
	}
	m, err := results.NewMerger(names)
	if err != nil {
		return nil, err
	}
	s := &Shards{m: m, Cases: opts.Cases, Files: len(names)}
	if err := s.read(opts); err != nil {
		m.Close()
		return nil, err
	}
	return s, nil
}

func (s *Shards) read(opts ShardOptions) error {
	m := s.m
	m.Key = opts.Key
	m.Skipped = opts.Skipped
	for i, src := range opts.Files {
		r, err := src.Open()
		if err != nil {
			return &MergeInputError{Err: fmt.Errorf("shard %s: %w", src.Name, err)}
		}
		n, err := m.Read(i, r)
		r.Close()
		if err != nil {
			return &MergeInputError{Err: err}
		}
		if n == 0 && opts.Empty != nil {
			opts.Empty(src.Name)
		}
	}
	if err := m.Foreign.Err("lines in the shard files that harness did not write (never merged; their shards cannot be trusted)"); err != nil {
		return &MergeInputError{Foreign: true, Err: err}
	}
	if err := m.Bad.Err("problems in the shard files"); err != nil {
		return &MergeInputError{Err: err}
	}
	if m.Records() == 0 {
		files := "1 file"
		if len(opts.Files) != 1 {
			files = fmt.Sprintf("%d files", len(opts.Files))
		}
		return &MergeInputError{Err: fmt.Errorf("no records in %s: nothing to merge", files)}
	}
	s.K = opts.K
	if s.K == 0 {
		s.K = max(m.MaxTrial(), 1)
	}
	s.IDs = m.Order()
	var stray StrayRecordsError
	if opts.Cases != nil {
		byID := map[string]bool{}
		s.IDs = nil
		for i := range opts.Cases {
			s.IDs = append(s.IDs, opts.Cases[i].ID)
			byID[opts.Cases[i].ID] = true
		}
		for _, id := range m.Order() {
			if !byID[id] {
				stray.NotInCases = append(stray.NotInCases, fmt.Sprintf("%s: case %q is not in %s (were the shards run on another prompts file?)", m.Where(id), id, opts.PromptsName))
			}
		}
	}
	stray.Beyond, stray.K = m.Beyond(s.K), s.K
	if len(stray.NotInCases)+len(stray.Beyond) > 0 {
		return &stray
	}
	s.Gaps = m.Gaps(s.IDs, s.K)
	return nil
}

// Close removes the spool the records were kept in.
func (s *Shards) Close() error { return s.m.Close() }

// Records is the number of units found.
func (s *Shards) Records() int { return s.m.Records() }

// Units is the number of units the run should have: cases × K.
func (s *Shards) Units() int { return len(s.IDs) * s.K }

// WriteCaptures writes the capture records as they are, in case and trial
// order.
func (s *Shards) WriteCaptures(w *results.Writer) error {
	return s.m.WriteCaptures(w, s.IDs, s.K)
}

// MergeTrialsOptions configure WriteTrials.
type MergeTrialsOptions struct {
	// FailOn are the error classes or owners whose trials count as
	// failures; LeaveOut those left out of n.
	FailOn, LeaveOut []string
	// Seed and Resamples are for the summary's bootstrap intervals.
	Seed      uint64
	Resamples int
}

// WriteTrials writes one trials record per case (of Cases, which must be
// set), built the way harness trials builds them, and returns the run's
// summary, which the caller writes where it goes.
func (s *Shards) WriteTrials(w *results.Writer, opts MergeTrialsOptions) (schemas.TrialsSummary, error) {
	failOn := trials.NewCounting(opts.FailOn, opts.LeaveOut)
	sum := trials.NewSummary(s.K)
	sum.SetPolicy(failOn)
	for i := range s.Cases {
		c := &s.Cases[i]
		recs, err := s.m.Trials(c.ID, s.K)
		if err != nil {
			return schemas.TrialsSummary{}, &MergeInputError{Err: err}
		}
		tr := trials.BuildRecordFailing(*c, s.K, recs, failOn)
		sum.Add(tr)
		if err := w.Write(tr); err != nil {
			return schemas.TrialsSummary{}, fmt.Errorf("merge: output: %w", err)
		}
	}
	return sum.Result(opts.Seed, opts.Resamples), nil
}
