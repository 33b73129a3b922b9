package view

import (
	"slices"
	"sort"
	"sync"

	"harness/schemas"
	"harness/trials"
)

// unitKey names a trial of a case.
type unitKey struct {
	id    string
	trial int
}

// Source is one stream of results: an output file, with the partial file
// of its cases in progress and the shards of a --slurm run beside it. Its
// rows are one per trial, in the order they were first seen; a trial seen
// again (a shard merged into the output, a partial trial whose case
// finished) keeps its place and takes the newer summary.
type Source struct {
	// ID is the output's path relative to its root, with slashes.
	ID string
	// Name is the agent's name in a run directory, else the file's name.
	Name string
	run  *Run

	path  string // the output's absolute path
	files []*file

	rows  []*Row // nil entries are trials that went away
	byKey map[unitKey]int
	// trialsOf lists the trial numbers seen of each case.
	trialsOf map[string][]int
	// ks holds the trials asked per case, from trials records; lastK is
	// the last one read, taken for the cases in progress.
	ks    map[string]int
	lastK int
	order []string // case ids in order of first appearance
	seen  map[string]bool
	kind  string
	agent string
	live  int // rows count

	// version changes with every change of rows; cases caches the case
	// aggregates of one version (aggMu guards the cache: readers holding
	// the index's read lock fill it).
	aggMu        sync.Mutex
	version      uint64
	casesVersion uint64
	cases        map[string]*caseAgg
}

// caseAgg is what a source's trials say about one case.
type caseAgg struct {
	trials.CaseCount
	K      int
	status string
	first  int64 // earliest start of its trials
	done   bool  // a trials record holds it (or it is a capture file's)
	cost   float64
	priced bool // some trial has a cost in USD
	dur    int64
	rows   []*Row
}

func newSource(id, name, path string) *Source {
	return &Source{ID: id, Name: name, path: path, byKey: map[unitKey]int{}, trialsOf: map[string][]int{}, ks: map[string]int{}, seen: map[string]bool{}}
}

// apply takes what a read of one of the source's files found; it returns
// the rows added or changed.
func (s *Source) apply(f *file, ch change) []*Row {
	if ch.reset {
		s.dropFile(f)
	}
	var changed []*Row
	for _, pl := range ch.lines {
		switch pl.kind {
		case lineCapture:
			if s.kind == "" && f.role != rolePartial {
				s.kind = schemas.KindCapture
			}
		case lineTrials:
			s.kind = schemas.KindTrials
			s.ks[pl.id] = pl.k
			s.lastK = pl.k
			if f.role == roleMain {
				s.dropStale(pl)
			}
		default:
			continue
		}
		for _, r := range pl.rows {
			if s.agent == "" && r.agent != "" {
				s.agent = r.agent
			}
			if s.put(r) {
				changed = append(changed, r)
			}
		}
	}
	if len(changed) > 0 || ch.reset {
		s.version++
	}
	return changed
}

// put adds or replaces the row of a trial; false when a row from a file
// that counts more holds it.
func (s *Source) put(r *Row) bool {
	k := unitKey{r.ID, r.Trial}
	if i, ok := s.byKey[k]; ok {
		old := s.rows[i]
		if old != nil && priority(old.loc.file.role) > priority(r.loc.file.role) {
			return false
		}
		if old == nil {
			s.live++
		}
		s.rows[i] = r
		return true
	}
	if !s.seen[r.ID] {
		s.seen[r.ID] = true
		s.order = append(s.order, r.ID)
	}
	s.byKey[k] = len(s.rows)
	s.trialsOf[r.ID] = append(s.trialsOf[r.ID], r.Trial)
	s.rows = append(s.rows, r)
	s.live++
	return true
}

// dropStale removes, when a case's trials record arrives in the output,
// the trials of that case other files hold that the record does not (an
// interrupted trial run again).
func (s *Source) dropStale(pl parsedLine) {
	keep := map[int]bool{}
	for _, r := range pl.rows {
		keep[r.Trial] = true
	}
	for _, trial := range s.trialsOf[pl.id] {
		i := s.byKey[unitKey{pl.id, trial}]
		if !keep[trial] && s.rows[i] != nil && s.rows[i].loc.file.role != roleMain {
			s.rows[i] = nil
			s.live--
		}
	}
}

// dropFile voids every row read from f.
func (s *Source) dropFile(f *file) {
	for i, r := range s.rows {
		if r != nil && r.loc.file == f {
			s.rows[i] = nil
			s.live--
		}
	}
}

// caseAggs returns the case aggregates of the current rows.
func (s *Source) caseAggs() map[string]*caseAgg {
	s.aggMu.Lock()
	defer s.aggMu.Unlock()
	if s.cases != nil && s.casesVersion == s.version {
		return s.cases
	}
	m := make(map[string]*caseAgg, len(s.order))
	for _, r := range s.rows {
		if r == nil {
			continue
		}
		a := m[r.ID]
		if a == nil {
			a = &caseAgg{CaseCount: trials.CaseCount{ID: r.ID}}
			m[r.ID] = a
		}
		a.rows = append(a.rows, r)
		a.Trials++
		switch r.excluded {
		case "":
			a.N++
			if r.pass {
				a.C++
			}
		case trials.Ungraded:
			a.Ungraded++
		default:
			if a.Errors == nil {
				a.Errors = map[string]int{}
			}
			a.Errors[r.excluded]++
		}
		if r.Start > 0 && (a.first == 0 || r.Start < a.first) {
			a.first = r.Start
		}
		if r.Cost != nil {
			a.cost += *r.Cost
			a.priced = true
		}
		a.dur += r.Duration
		if r.loc.file.role != rolePartial {
			a.done = true
		}
	}
	for id, a := range m {
		k := s.ks[id]
		if k == 0 && !a.done {
			k = s.lastK
		}
		if k == 0 && !a.done && s.run != nil && s.run.manifest != nil {
			// No case is done yet: the run's k, not the trials so far.
			k = s.run.manifest.K
		}
		a.K = max(k, a.Trials)
		a.status = caseStatus(a.N, a.C, len(a.Errors) > 0)
		slices.SortFunc(a.rows, func(x, y *Row) int { return x.Trial - y.Trial })
	}
	s.cases, s.casesVersion = m, s.version
	return m
}

// caseStatus is the report's case status.
func caseStatus(n, c int, errored bool) string {
	switch {
	case n == 0 && errored:
		return statusError
	case n == 0:
		return statusUngraded
	case c == n:
		return statusPass
	case c == 0:
		return statusFail
	}
	return "flaky"
}

// counts returns the source's per-case counts in case order, for the
// statistics of trials.
func (s *Source) counts() []*trials.CaseCount {
	aggs := s.caseAggs()
	out := make([]*trials.CaseCount, 0, len(aggs))
	for _, id := range s.order {
		if a := aggs[id]; a != nil {
			cc := a.CaseCount
			out = append(out, &cc)
		}
	}
	return out
}

// Totals sums a source for the runs list.
type Totals struct {
	Cases    int      `json:"cases"`
	Trials   int      `json:"trials"`
	Graded   int      `json:"graded"`
	Passed   int      `json:"passed"`
	Errors   int      `json:"errors"`
	Ungraded int      `json:"ungraded"`
	PassRate *float64 `json:"passRate,omitempty"`
	Low      *float64 `json:"low,omitempty"`
	High     *float64 `json:"high,omitempty"`
	Cost     *float64 `json:"cost,omitempty"`
	Tokens   int64    `json:"tokens,omitempty"`
	// Coverage says what the pass rate is over ("over 96 of 100 trials;
	// 4 left out (infra: 3, grader: 1)").
	Coverage string `json:"coverage,omitempty"`
	// Expected is the trials the run will have when done, ExpectedCases
	// its cases (0: unknown).
	Expected      int `json:"expected,omitempty"`
	ExpectedCases int `json:"expectedCases,omitempty"`
	// Start and End bound the trials' times (epoch ms).
	Start int64 `json:"start,omitempty"`
	End   int64 `json:"end,omitempty"`
}

func (s *Source) totals() Totals {
	var t Totals
	var all trials.Counts
	for _, a := range s.caseAggs() {
		cc := a.CaseCount
		all.Merge(cc.Counts())
		t.Cases++
		t.Trials += a.Trials
		t.Graded += a.N
		t.Passed += a.C
		t.Ungraded += a.Ungraded
		for _, v := range a.Errors {
			t.Errors += v
		}
	}
	var cost float64
	priced := false
	for _, r := range s.rows {
		if r == nil {
			continue
		}
		if r.Cost != nil {
			cost += *r.Cost
			priced = true
		}
		t.Tokens += r.Tokens
		if r.Start > 0 && (t.Start == 0 || r.Start < t.Start) {
			t.Start = r.Start
		}
		t.End = max(t.End, r.End)
	}
	if priced {
		c := schemas.RoundUSD(cost)
		t.Cost = &c
	}
	if t.Graded > 0 {
		t.Coverage = all.Coverage()
		rate := float64(t.Passed) / float64(t.Graded)
		t.PassRate = &rate
		if lo, hi, ok := trials.Wilson(t.Passed, t.Graded, trials.Z95); ok {
			t.Low, t.High = &lo, &hi
		}
	}
	return t
}

// inProgress lists the cases some of whose trials are in but not their
// trials record, oldest first.
func (s *Source) inProgress() []caseProgress {
	if s.kind != schemas.KindTrials && !s.hasPartial() {
		return nil
	}
	var out []caseProgress
	for id, a := range s.caseAggs() {
		if a.done {
			continue
		}
		out = append(out, caseProgress{ID: id, Trials: a.Trials, K: a.K, Start: a.first})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}

func (s *Source) hasPartial() bool {
	for _, f := range s.files {
		if f.role == rolePartial && !f.isGone() {
			return true
		}
	}
	return false
}

// caseProgress is a case whose trials are not all in.
type caseProgress struct {
	ID     string `json:"id"`
	Trials int    `json:"trials"`
	K      int    `json:"k,omitempty"`
	Start  int64  `json:"start,omitempty"`
}

// problems returns the bad lines of the source's files.
func (s *Source) problems() []string {
	var out []string
	for _, f := range s.files {
		list, more := f.problemList()
		out = append(out, list...)
		if more {
			out = append(out, f.rel+": and more bad lines")
		}
	}
	return out
}
