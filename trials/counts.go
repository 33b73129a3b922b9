package trials

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"harness/schemas"
)

// Counts are a run's trial counts: the trials it holds, how many were
// graded (n) and passed (c), and why the others were left out. Every
// count a run shows (its last line, the headline of its table, its
// summary file and its report) is a Counts, made the same way from the
// records of the whole output (a resumed run's earlier records too):
// records are counted one by one with Add, trials records through
// Summary, whose result gives them back with CountsOf.
type Counts struct {
	// Trials counts every trial record.
	Trials int
	// Graded counts the trials in n (graded, or failed by their agent);
	// Passed those that passed (c).
	Graded, Passed int
	// Ungraded counts trials run without a grader.
	Ungraded int
	// Missing counts asked trials that have no record.
	Missing int
	// Errors counts the trials left out of n, by error class (the
	// agent's and the graders').
	Errors map[string]int
	// LeftOut counts the trials left out of n by owner (infra, grader,
	// config; agent when the policy leaves them out), and by class for
	// those without an owner (interrupted trials, records of older runs).
	LeftOut map[string]int
	// Failures counts the trials that failed with an error (the agent's
	// own, or a class the policy counts), by class: in n, or, in a run
	// without a grader, ungraded.
	Failures map[string]int
	// Attempts counts the failed attempts retried before a trial's record
	// (never trials themselves); Retried the trials that had any, and
	// AttemptsCost what the failed attempts spent.
	Attempts, Retried int
	AttemptsCost      *schemas.Cost
}

// Add counts one trial record under policy p (see OutcomeUnder) and
// returns how it counted.
func (c *Counts) Add(r *schemas.CaptureRecord, p Counting) (pass bool, excluded string) {
	pass, excluded = OutcomeUnder(r, p)
	c.count(r, pass, excluded, FailureClass(r, p))
	return pass, excluded
}

func (c *Counts) count(r *schemas.CaptureRecord, pass bool, excluded, failure string) {
	c.Trials++
	if n := len(r.Attempts); n > 0 {
		c.Attempts += n
		c.Retried++
		c.AttemptsCost = c.AttemptsCost.Add(r.AttemptsCost())
	}
	switch excluded {
	case "":
		c.Graded++
		if pass {
			c.Passed++
		}
		if failure != "" {
			c.Failures = inc(c.Failures, failure)
		}
	case Ungraded:
		c.Ungraded++
		if r.Error != nil && r.Error.Owner == schemas.OwnerAgent {
			// Run without a grader: failed all the same.
			c.Failures = inc(c.Failures, classOf(r.Error))
		}
	default:
		c.Errors = inc(c.Errors, excluded)
		c.LeftOut = inc(c.LeftOut, cmp.Or(r.OwnerOf(), excluded))
	}
}

func inc(m map[string]int, key string) map[string]int {
	if m == nil {
		m = map[string]int{}
	}
	m[key]++
	return m
}

// AddEntry counts one trial of a trials record as the record counted it
// (see EntryOutcome) and returns how.
func (c *Counts) AddEntry(e *schemas.TrialEntry) (pass bool, excluded string) {
	rec := e.Capture()
	pass, excluded = EntryOutcome(e)
	failure := ""
	if excluded == "" && !pass {
		switch {
		case rec.Error != nil:
			failure = classOf(rec.Error)
		case rec.Score != nil && rec.Score.Error != nil:
			failure = cmp.Or(rec.Score.Error.Class, schemas.ErrGraderError)
		}
	}
	c.count(&rec, pass, excluded, failure)
	return pass, excluded
}

// EntryOutcome says how a trial of a trials record counted: as the run
// that wrote it decided. An entry that names why it was left out
// (excluded) was; one with an error and a flat verdict (pass, score) was
// counted in n with that verdict (an agent-owned failure, a class the
// policy counted, a trial graded as it stands); any other counts as its
// record does (Outcome).
func EntryOutcome(e *schemas.TrialEntry) (pass bool, excluded string) {
	rec := e.Capture()
	pass, excluded = Outcome(&rec)
	if e.Excluded != "" && e.Excluded != Ungraded && (rec.Error != nil || rec.Score != nil && rec.Score.Error != nil) {
		return false, e.Excluded
	}
	if e.Excluded == "" && e.Pass != nil && (rec.Error != nil || rec.Score != nil && rec.Score.Error != nil) {
		return *e.Pass, ""
	}
	return pass, excluded
}

// Merge adds the counts of o to c.
func (c *Counts) Merge(o Counts) {
	c.Trials += o.Trials
	c.Graded += o.Graded
	c.Passed += o.Passed
	c.Ungraded += o.Ungraded
	c.Missing += o.Missing
	c.Errors = addAll(c.Errors, o.Errors)
	c.LeftOut = addAll(c.LeftOut, o.LeftOut)
	c.Failures = addAll(c.Failures, o.Failures)
	c.Attempts += o.Attempts
	c.Retried += o.Retried
	c.AttemptsCost = c.AttemptsCost.Add(o.AttemptsCost)
}

func addAll(m, o map[string]int) map[string]int {
	for k, n := range o {
		if m == nil {
			m = map[string]int{}
		}
		m[k] += n
	}
	return m
}

// CountsOf returns the counts of a run's summary.
func CountsOf(s schemas.TrialsSummary) Counts {
	c := Counts{Trials: s.Trials, Graded: s.Graded, Passed: s.Passes, Ungraded: s.Ungraded,
		Missing: s.Missing, Errors: maps.Clone(s.Errors), LeftOut: maps.Clone(s.LeftOut), Failures: maps.Clone(s.Failures)}
	if c.LeftOut == nil && len(s.Errors) > 0 {
		// A summary of an older run: its errors were left out by class.
		c.LeftOut = maps.Clone(s.Errors)
	}
	if r := s.Retries; r != nil {
		c.Attempts, c.Retried, c.AttemptsCost = r.Attempts, r.Trials, r.Cost
	}
	return c
}

// IsGraderClass says whether an error class is a grader's (the grader
// failed, timed out or answered nonsense) rather than the agent's or the
// harness's.
func IsGraderClass(class string) bool {
	return class == schemas.ErrGraderError || class == schemas.ErrGraderTimeout || class == schemas.ErrGraderInvalid
}

// Line says the counts in one line, as a run ends with it: "12 records:
// pass 70.0% over 10 of 12 trials; 2 left out (infra: 1, grader: 1);
// failed by the agent: timeout 1; 3 failed attempts retried". The pass
// rate is left out when nothing is in n.
func (c Counts) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d records", c.Trials)
	if c.Graded > 0 {
		fmt.Fprintf(&b, ": pass %.1f%% %s", 100*float64(c.Passed)/float64(c.Graded), c.Coverage())
	} else if len(c.Errors) > 0 || len(c.LeftOut) > 0 || c.Missing > 0 {
		b.WriteString(": nothing in n; " + c.leftOutPart(true))
	}
	if len(c.Failures) > 0 {
		b.WriteString("; failed by the agent: " + ClassCounts(c.Failures))
	}
	if c.Attempts > 0 {
		fmt.Fprintf(&b, "; %s", c.RetryNote())
	}
	return b.String()
}

// RetryNote says what retries did: "3 failed attempts retried (2 trials),
// $0.0100 spent on them".
func (c Counts) RetryNote() string {
	if c.Attempts == 0 {
		return ""
	}
	note := fmt.Sprintf("%d failed %s retried (%d %s)", c.Attempts, plural(c.Attempts, "attempt"), c.Retried, plural(c.Retried, "trial"))
	if c.AttemptsCost != nil && c.AttemptsCost.USD != nil {
		note += fmt.Sprintf(", $%.4f spent on them", *c.AttemptsCost.USD)
	} else if t := c.AttemptsCost.Tokens(); t > 0 {
		note += fmt.Sprintf(", %d tokens spent on them", t)
	}
	return note
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// Coverage says how many of the run's trials a pass rate is over and why
// the others are not in it: "over 96 of 100 trials; 4 left out (infra: 3,
// grader: 1)". Every headline of a pass rate ends with it.
func (c Counts) Coverage() string {
	total := c.Trials + c.Missing
	s := fmt.Sprintf("over %d of %d %s", c.Graded, total, plural(total, "trial"))
	if left := c.leftOutPart(false); left != "" {
		s += "; " + left
	}
	return s
}

// LeftOutCount is how many asked trials are not in n.
func (c Counts) LeftOutCount() int { return c.Trials + c.Missing - c.Graded }

// Covered is the share of the asked trials that are in n (1 when none was
// asked).
func (c Counts) Covered() float64 {
	if c.Trials+c.Missing == 0 {
		return 1
	}
	return float64(c.Graded) / float64(c.Trials+c.Missing)
}

// leftOutPart says "4 left out (infra: 3, grader: 1)": the owners in
// their order, then classes of trials without one, then trials without
// a grader and missing ones. Empty when none is left out, unless always.
func (c Counts) leftOutPart(always bool) string {
	n := c.LeftOutCount()
	if n <= 0 && !always {
		return ""
	}
	var parts []string
	seen := map[string]bool{}
	for _, o := range schemas.Owners {
		if v := c.LeftOut[o]; v > 0 {
			parts = append(parts, fmt.Sprintf("%s: %d", o, v))
			seen[o] = true
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.LeftOut)) {
		if !seen[k] && c.LeftOut[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s: %d", k, c.LeftOut[k]))
		}
	}
	if c.LeftOut == nil {
		// Counts made without owners: the classes.
		for _, k := range slices.Sorted(maps.Keys(c.Errors)) {
			parts = append(parts, fmt.Sprintf("%s: %d", k, c.Errors[k]))
		}
	}
	if c.Ungraded > 0 {
		parts = append(parts, fmt.Sprintf("ungraded: %d", c.Ungraded))
	}
	if c.Missing > 0 {
		parts = append(parts, fmt.Sprintf("missing: %d", c.Missing))
	}
	s := fmt.Sprintf("%d left out", max(n, 0))
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}
