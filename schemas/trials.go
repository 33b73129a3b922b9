package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// TrialsRecord is one line of trials output: every trial of one prompt case
// and what they say together.
//
// It is a superset of acp-harness's TrialResult (id, input, expected, k,
// trials, passRate, passAtK, passExpK). n counts the trials that produced a
// gradable result: trials that failed for infrastructure reasons (an Error
// on the record, or a grader that failed) are left out of n and counted in
// Errors by class; trials run without a grader are counted in Ungraded.
//
// PassAtK and PassExpK are the unbiased estimators at the asked K. They are
// defined only when N ≥ K; when fewer trials were graded they are absent
// (never NaN) and Warnings says why; PassAt and PassExp still hold the
// curves for k = 1..N.
type TrialsRecord struct {
	ID       string         `json:"id"`
	Input    Turns          `json:"input"`
	Expected string         `json:"expected,omitempty"`
	Hint     string         `json:"hint,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
	// K is the number of trials asked for.
	K int `json:"k"`
	// N is the number of trials with a grader verdict.
	N int `json:"n"`
	// C is the number of those that passed.
	C int `json:"c"`
	// Trials holds every trial, graded or not, in trial order.
	Trials []TrialEntry `json:"trials"`
	// PassRate is C/N; absent when N is 0.
	PassRate *float64 `json:"passRate,omitempty"`
	// PassAtK is pass@K; absent when N < K.
	PassAtK *float64 `json:"passAtK,omitempty"`
	// PassExpK is pass^K; absent when N < K.
	PassExpK *float64 `json:"passExpK,omitempty"`
	// PassAt holds pass@k for k = 1..N, keyed "1".."N".
	PassAt Curve `json:"passAt"`
	// PassExp holds pass^k for k = 1..N, keyed "1".."N".
	PassExp Curve `json:"passExp"`
	// PassRateCI is the Wilson 95% interval of PassRate; absent when N is 0.
	PassRateCI *Interval `json:"passRateCI,omitempty"`
	// MeanScore is the mean score of the N graded trials, for graders
	// whose verdict is a score more than a pass (absent when N is 0).
	MeanScore *float64 `json:"meanScore,omitempty"`
	// Errors counts the trials left out of N, by error class.
	Errors map[string]int `json:"errors,omitempty"`
	// LeftOut counts the trials left out of N by owner (by class for
	// those without one).
	LeftOut map[string]int `json:"leftOut,omitempty"`
	// Failures counts the trials in N that failed with an error (the
	// agent's own), by class.
	Failures map[string]int `json:"failures,omitempty"`
	// Attempts counts the failed attempts retried before the trials'
	// records (they are not trials).
	Attempts int `json:"attempts,omitempty"`
	// Ungraded counts trials that ran without a grader (also left out of N).
	Ungraded int `json:"ungraded,omitempty"`
	// Missing counts asked trials that have no record at all.
	Missing int `json:"missing,omitempty"`
	// Warnings says, for people, why a metric is absent or partial.
	Warnings []string `json:"warnings,omitempty"`
	// Cost sums the trials' costs.
	Cost *Cost `json:"cost,omitempty"`
	// Adaptive is set by an adaptive run: why the case stopped and its
	// estimates that stay unbiased under the stopping rule.
	Adaptive *AdaptiveCase `json:"adaptive,omitempty"`
	// CaseHash is the content hash of the case (PromptCase.ContentHash);
	// empty in records of older runs.
	CaseHash string `json:"caseHash,omitempty"`
}

// Interval is a confidence interval.
type Interval struct {
	Low  float64 `json:"low"`
	High float64 `json:"high"`
	// Method is set where the interval is not the kind its field names:
	// "exact" (Clopper–Pearson over the cases, when every case passed or
	// every case failed, so a bootstrap over cases has no spread) or
	// "none" (every case has the same value otherwise: the interval is
	// the point).
	Method string `json:"method,omitempty"`
}

// TrialEntry is one trial inside a TrialsRecord: the capture record of that
// trial plus the flat fields of acp-harness's TrialEntry.
//
// Both views live in one JSON object. All capture record fields are there
// as in a capture file (id, trial, output, trajectory, timing, error, ...),
// except "score": acp-harness's TrialEntry has score as a number, so here
// "score" is the number and the full grader result moves to "graderResult".
// The acp-harness fields are trialNum (= trial), duration (ms), pass, score
// and reasoning; pass, score and reasoning are absent when the trial has no
// grader verdict, and Excluded then names why (an error class, or
// "ungraded").
type TrialEntry struct {
	// Record is the capture record of this trial; Record.Score is encoded as
	// graderResult.
	Record       CaptureRecord
	TrialNum     int
	Duration     int64
	Pass         *bool
	Score        *float64
	Reasoning    string
	GraderResult *GraderResult
	Excluded     string
}

// NewTrialEntry builds the entry for one capture record: the flat fields are
// filled from the record's timing and grader result. excluded is the reason
// the trial is not in n ("" when it is graded).
func NewTrialEntry(rec CaptureRecord, excluded string) TrialEntry {
	e := TrialEntry{Record: rec, TrialNum: rec.Trial, Duration: RecordDuration(&rec), Excluded: excluded}
	e.GraderResult = rec.Score
	if rec.Score != nil && excluded == "" {
		pass, score := rec.Score.Pass, rec.Score.Score
		e.Pass, e.Score, e.Reasoning = &pass, &score, rec.Score.Reasoning
	}
	return e
}

// RecordDuration is how long a record's trial took in milliseconds: the
// whole trial (timing.trial: the agent, a task's verification and the
// graders in the trial's slot) when set, else the agent's part
// (AgentDuration), which is all a record of an older run has.
func RecordDuration(r *CaptureRecord) int64 {
	if r.Timing.Trial > 0 {
		return r.Timing.Trial
	}
	return AgentDuration(r)
}

// AgentDuration is the agent's part of a record's trial in milliseconds:
// timing.total when set, else end − start.
func AgentDuration(r *CaptureRecord) int64 {
	if r.Timing.Total > 0 {
		return r.Timing.Total
	}
	if d := r.Timing.End - r.Timing.Start; d > 0 {
		return d
	}
	return 0
}

// Capture returns the trial as a capture record, with the grader result put
// back in Score. Entries written by acp-harness (no graderResult, only the
// flat pass/score/reasoning) get a grader result built from those.
func (e *TrialEntry) Capture() CaptureRecord {
	r := e.Record
	if r.Trial == 0 {
		r.Trial = e.TrialNum
	}
	r.Score = e.GraderResult
	if r.Score == nil && e.Pass != nil {
		g := GraderResult{Pass: *e.Pass, Reasoning: e.Reasoning}
		if e.Score != nil {
			g.Score = *e.Score
		} else if *e.Pass {
			g.Score = 1
		}
		r.Score = &g
	}
	if r.Timing.Total == 0 && r.Timing.End == 0 && e.Duration > 0 {
		r.Timing.Total = e.Duration
	}
	return r
}

// MarshalJSON writes the capture record's fields followed by trialNum,
// duration, pass, score, reasoning, graderResult and excluded.
func (e TrialEntry) MarshalJSON() ([]byte, error) {
	rec := e.Record
	rec.Score = nil
	if rec.Trajectory == nil {
		rec.Trajectory = []Step{}
	}
	base, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	if len(base) < 2 || base[len(base)-1] != '}' {
		return nil, fmt.Errorf("trial entry: capture record did not encode as an object")
	}
	var buf bytes.Buffer
	buf.Write(base[:len(base)-1])
	sep := len(base) > 2
	add := func(key string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("trial entry field %s: %w", key, err)
		}
		if sep {
			buf.WriteByte(',')
		}
		sep = true
		fmt.Fprintf(&buf, "%q:", key)
		buf.Write(b)
		return nil
	}
	fields := []struct {
		key  string
		v    any
		skip bool
	}{
		{"trialNum", e.TrialNum, false},
		{"duration", e.Duration, false},
		{"pass", e.Pass, e.Pass == nil},
		{"score", e.Score, e.Score == nil},
		{"reasoning", e.Reasoning, e.Reasoning == ""},
		{"graderResult", e.GraderResult, e.GraderResult == nil},
		{"excluded", e.Excluded, e.Excluded == ""},
	}
	for _, f := range fields {
		if f.skip {
			continue
		}
		if err := add(f.key, f.v); err != nil {
			return nil, err
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalJSON reads an entry written by harness or by acp-harness. A
// "score" that is an object (a capture record put in verbatim) is taken as
// the grader result.
func (e *TrialEntry) UnmarshalJSON(b []byte) error {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	if all == nil {
		return fmt.Errorf("trial entry must be an object")
	}
	var out TrialEntry
	scoreRaw, hasScore := all["score"]
	delete(all, "score")
	rest, err := json.Marshal(all)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(rest, &out.Record); err != nil {
		return err
	}
	var flat struct {
		TrialNum     int           `json:"trialNum"`
		Duration     float64       `json:"duration"`
		Pass         *bool         `json:"pass"`
		Reasoning    string        `json:"reasoning"`
		GraderResult *GraderResult `json:"graderResult"`
		Excluded     string        `json:"excluded"`
	}
	if err := json.Unmarshal(rest, &flat); err != nil {
		return err
	}
	out.TrialNum, out.Duration, out.Pass = flat.TrialNum, int64(flat.Duration), flat.Pass
	out.Reasoning, out.GraderResult, out.Excluded = flat.Reasoning, flat.GraderResult, flat.Excluded
	if hasScore && string(bytes.TrimSpace(scoreRaw)) != "null" {
		s := bytes.TrimSpace(scoreRaw)
		if len(s) > 0 && s[0] == '{' {
			var g GraderResult
			if err := json.Unmarshal(s, &g); err != nil {
				return fmt.Errorf("field \"score\": %w", err)
			}
			if out.GraderResult == nil {
				out.GraderResult = &g
			}
			if g.Error == nil {
				pass, score := g.Pass, g.Score
				if out.Pass == nil {
					out.Pass = &pass
				}
				out.Score = &score
				if out.Reasoning == "" {
					out.Reasoning = g.Reasoning
				}
			}
		} else {
			var f float64
			if err := json.Unmarshal(s, &f); err != nil {
				return fmt.Errorf("field \"score\": must be a number or a grader result object")
			}
			out.Score = &f
		}
	}
	out.Record.Score = nil
	if out.Record.Trial == 0 {
		out.Record.Trial = out.TrialNum
	}
	if out.TrialNum == 0 {
		out.TrialNum = out.Record.Trial
	}
	*e = out
	return nil
}

// SummaryType is the "type" of a TrialsSummary record, which tells it apart
// from trials records when it ends a trials file.
const SummaryType = "trials-summary"

// TrialsSummary aggregates the trials records of a run: means over cases of
// pass@k and pass^k with percentile bootstrap intervals (cases resampled
// with replacement, a seeded PCG generator), the pooled pass rate, and the
// trials left out of n.
type TrialsSummary struct {
	// Type is always SummaryType.
	Type string `json:"type"`
	// K is the number of trials asked per case (the largest seen).
	K int `json:"k"`
	// Cases counts the trials records added.
	Cases int `json:"cases"`
	// ScoredCases counts cases with at least one graded trial (n ≥ 1); only
	// these enter the means.
	ScoredCases int `json:"scoredCases"`
	// UnscoredCases lists the ids of cases with n = 0.
	UnscoredCases []string `json:"unscoredCases,omitempty"`
	// Trials counts every trial record; Graded sums n; Passes sums c.
	Trials int `json:"trials"`
	Graded int `json:"graded"`
	Passes int `json:"passes"`
	// Ungraded counts trials run without a grader.
	Ungraded int `json:"ungraded,omitempty"`
	// Missing counts asked trials with no record.
	Missing int `json:"missing,omitempty"`
	// Errors counts trials left out of n, by class.
	Errors map[string]int `json:"errors,omitempty"`
	// LeftOut counts trials left out of n by owner (infra, grader,
	// config; by class for those without one).
	LeftOut map[string]int `json:"leftOut,omitempty"`
	// Failures counts the trials in n that failed with an error (the
	// agent's own: a crash, a protocol break, a limit), by class.
	Failures map[string]int `json:"failures,omitempty"`
	// Policy is how failed trials were counted.
	Policy *CountPolicy `json:"policy,omitempty"`
	// Retries says what retrying infrastructure failures took.
	Retries *RetryCounts `json:"retries,omitempty"`
	// PassRate is Passes/Graded (pooled over trials); absent when nothing
	// was graded.
	PassRate *float64 `json:"passRate,omitempty"`
	// PassRateCI is a bootstrap interval of PassRate, resampling cases.
	PassRateCI *Interval `json:"passRateCI,omitempty"`
	// MeanScore is the mean over cases of their graded trials' mean
	// score, with its bootstrap interval over cases; absent when nothing
	// was graded or the records carry no scores.
	MeanScore *Estimate `json:"meanScore,omitempty"`
	// PassAtK and PassExpK are the means at the asked K, over the cases with
	// n ≥ K; absent when no case has that many graded trials.
	PassAtK  *Estimate `json:"passAtK,omitempty"`
	PassExpK *Estimate `json:"passExpK,omitempty"`
	// PassAt and PassExp hold the mean curves keyed "1".."max n"; each point
	// averages the cases with n ≥ k (Cases says how many).
	PassAt  EstimateCurve `json:"passAt"`
	PassExp EstimateCurve `json:"passExp"`
	// Confidence, Seed and Resamples describe the bootstrap.
	Confidence float64 `json:"confidence"`
	Seed       uint64  `json:"seed"`
	Resamples  int     `json:"resamples"`
	// Warnings says which numbers are partial and why.
	Warnings []string `json:"warnings,omitempty"`
	// Cost sums the cases' costs.
	Cost *Cost `json:"cost,omitempty"`
	// Adaptive is set for an adaptive run. Then PassRate is the mean over
	// cases of their unbiased per-case estimates (AdaptiveCase.PassRate),
	// PassAt and PassExp come from the first MinK trials of every case
	// (K is MinK), and Graded and Passes count every trial.
	Adaptive *AdaptiveSummary `json:"adaptive,omitempty"`
}

// CountPolicy is how a run counted its failed trials: the owners whose
// failures are in n (Counted) and left out (LeftOut) by default, and the
// classes or owners moved by hand (FailOn: counted in n as failures;
// LeaveOut: left out).
type CountPolicy struct {
	Counted  []string `json:"counted"`
	LeftOut  []string `json:"leftOut"`
	FailOn   []string `json:"failOn,omitempty"`
	LeaveOut []string `json:"leaveOut,omitempty"`
}

// RetryCounts are a run's retries: the failed attempts retried, the
// trials that had any, and what the failed attempts spent (part of the
// summary's Cost, shown apart here).
type RetryCounts struct {
	Attempts int   `json:"attempts"`
	Trials   int   `json:"trials"`
	Cost     *Cost `json:"cost,omitempty"`
}

// Estimate is a mean over cases with its bootstrap interval.
type Estimate struct {
	K     int     `json:"k"`
	Mean  float64 `json:"mean"`
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
	Cases int     `json:"cases"`
	// Method is "exact" or "none" where the interval is not the bootstrap
	// (see Interval.Method).
	Method string `json:"method,omitempty"`
}
