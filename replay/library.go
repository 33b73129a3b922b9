package replay

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"sync"

	"harness/acp"
	"harness/review"
	"harness/schemas"
)

// Library is the recorded trials a replay serves, found by the text of
// their first prompt. The n-th session that sends a prompt gets the n-th
// recorded trial of it (in the results file's case order, then by trial
// number), so a replayed run with the same prompts gets every trial once.
// It is safe for concurrent use.
type Library struct {
	mu       sync.Mutex
	byPrompt map[string][]*schemas.CaptureRecord
	byUnit   map[acp.UnitMeta]*schemas.CaptureRecord
	served   map[*schemas.CaptureRecord]bool
	prompts  int
	records  int
	// order is every record in the order the recorded run made their
	// sessions (by start time, else cases in the file's order and each
	// case's trials in turn): the n-th session a replay process makes is
	// expected to be order[n].
	order []*schemas.CaptureRecord
}

// Load reads a capture or trials file (each trial of a trials record is
// one record). Errors name the file and the line.
func Load(name string, r io.Reader) (*Library, error) {
	type keyed struct {
		rec   *schemas.CaptureRecord
		order int // the case's first appearance in the file
	}
	caseOrder := map[string]int{}
	var all []keyed
	seen := map[[2]any]int{}
	_, err := review.EachRecord(name, r, func(line int, rec *schemas.CaptureRecord) error {
		k := [2]any{rec.ID, rec.Trial}
		if prev, ok := seen[k]; ok {
			return &schemas.InputError{File: name, Line: line, Field: "trial",
				Msg: fmt.Sprintf("case %q trial %d is also on line %d: a replay serves each trial once", rec.ID, rec.Trial, prev)}
		}
		seen[k] = line
		if len(rec.Input.List) == 0 {
			return &schemas.InputError{File: name, Line: line, Field: "input", Msg: "missing: a replay finds records by their prompt"}
		}
		if _, ok := caseOrder[rec.ID]; !ok {
			caseOrder[rec.ID] = len(caseOrder)
		}
		c := *rec
		all = append(all, keyed{&c, caseOrder[rec.ID]})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(all) == 0 {
		return nil, &schemas.InputError{File: name, Msg: "no records to replay"}
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].order != all[j].order {
			return all[i].order < all[j].order
		}
		return all[i].rec.Trial < all[j].rec.Trial
	})
	lib := &Library{byPrompt: map[string][]*schemas.CaptureRecord{}, byUnit: map[acp.UnitMeta]*schemas.CaptureRecord{},
		served: map[*schemas.CaptureRecord]bool{}, records: len(all)}
	for _, k := range all {
		p := k.rec.Input.List[0]
		lib.byPrompt[p] = append(lib.byPrompt[p], k.rec)
		lib.byUnit[acp.UnitMeta{ID: k.rec.ID, Trial: k.rec.Trial}] = k.rec
	}
	lib.prompts = len(lib.byPrompt)
	// Sessions were made in the order the trials started, which the
	// file's order need not be (a record is written when it finishes).
	started := true
	for _, k := range all {
		lib.order = append(lib.order, k.rec)
		started = started && k.rec.Timing.Start > 0
	}
	if started {
		sort.SliceStable(lib.order, func(i, j int) bool { return lib.order[i].Timing.Start < lib.order[j].Timing.Start })
	}
	return lib, nil
}

// Records is how many recorded trials the library holds.
func (l *Library) Records() int { return l.records }

// expected is the record the n-th session (from 0) of a replay process
// is expected to replay, or nil.
func (l *Library) expected(n int) *schemas.CaptureRecord {
	if n < len(l.order) {
		return l.order[n]
	}
	return nil
}

// setupSteps returns the steps of phase setup.
func setupSteps(r *schemas.CaptureRecord) []schemas.Step {
	var out []schemas.Step
	for _, st := range r.Trajectory {
		if st.Phase == schemas.PhaseSetup {
			out = append(out, st)
		}
	}
	return out
}

// stepsKey identifies steps by what they say, not when or where they
// came: step ids, times, turns and phases left out.
func stepsKey(steps []schemas.Step) string {
	c := make([]schemas.Step, len(steps))
	for i, st := range steps {
		st.StepID, st.Timestamp, st.Duration, st.Turn, st.Phase = "", 0, nil, 0, ""
		c[i] = st
	}
	b, _ := json.Marshal(c)
	return string(b)
}

// errNoRecord is the answer to a prompt the library cannot serve.
type errNoRecord struct{ msg string }

func (e *errNoRecord) Error() string { return e.msg }

// take returns the first recorded trial whose first prompt is text and
// that no session got yet.
func (l *Library) take(text string) (*schemas.CaptureRecord, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q, ok := l.byPrompt[text]
	if !ok {
		return nil, &errNoRecord{fmt.Sprintf("replay: no recorded trial has this prompt (the results hold %d records of %d prompts): %.200q",
			l.records, l.prompts, text)}
	}
	for _, rec := range q {
		if !l.served[rec] {
			l.served[rec] = true
			return rec, nil
		}
	}
	return nil, &errNoRecord{fmt.Sprintf("replay: all %d recorded trials of this prompt were served (case %q): %.200q",
		len(q), q[0].ID, text)}
}

// takeUnit returns the recorded trial of a case, for a client that said
// which one a session is for.
func (l *Library) takeUnit(u acp.UnitMeta) (*schemas.CaptureRecord, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rec, ok := l.byUnit[u]
	switch {
	case !ok:
		return nil, &errNoRecord{fmt.Sprintf("replay: the results hold no trial %d of case %q", u.Trial, u.ID)}
	case l.served[rec]:
		return nil, &errNoRecord{fmt.Sprintf("replay: trial %d of case %q was served already", u.Trial, u.ID)}
	}
	l.served[rec] = true
	return rec, nil
}
