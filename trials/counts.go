package trials

import (
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
	// Graded counts the trials with a verdict (n); Passed those that
	// passed (c).
	Graded, Passed int
	// Ungraded counts trials run without a grader.
	Ungraded int
	// Missing counts asked trials that have no record.
	Missing int
	// Errors counts the trials left out of n, by error class (the
	// agent's and the graders').
	Errors map[string]int
}

// Add counts one trial record and returns how it counted (as Outcome
// says; a trial whose error class is in failOn counts in n as a failure,
// as BuildRecordFailing counts it).
func (c *Counts) Add(r *schemas.CaptureRecord, failOn map[string]bool) (pass bool, excluded string) {
	pass, excluded = Outcome(r)
	if excluded != "" && excluded != Ungraded && failOn[excluded] {
		pass, excluded = false, ""
	}
	c.Trials++
	switch excluded {
	case "":
		c.Graded++
		if pass {
			c.Passed++
		}
	case Ungraded:
		c.Ungraded++
	default:
		if c.Errors == nil {
			c.Errors = map[string]int{}
		}
		c.Errors[excluded]++
	}
	return pass, excluded
}

// AddEntry counts one trial of a trials record as the record counted it
// (see EntryOutcome) and returns how.
func (c *Counts) AddEntry(e *schemas.TrialEntry) (pass bool, excluded string) {
	rec := e.Capture()
	pass, excluded = EntryOutcome(e)
	if excluded == "" && rec.Error != nil {
		// Counted as a failure (--fail-on): count it so.
		rec.Error, rec.Score = nil, &schemas.GraderResult{}
	}
	c.Add(&rec, nil)
	return pass, excluded
}

// EntryOutcome says how a trial of a trials record counted: as its record
// does (Outcome), except a trial with an error that the run counted in n
// as a failure (--fail-on; harness writes it with pass false and score 0,
// and no exclusion).
func EntryOutcome(e *schemas.TrialEntry) (pass bool, excluded string) {
	rec := e.Capture()
	pass, excluded = Outcome(&rec)
	if excluded != "" && excluded != Ungraded && e.Excluded == "" && e.Pass != nil && !*e.Pass && e.Score != nil && *e.Score == 0 {
		return false, ""
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
	for class, n := range o.Errors {
		if c.Errors == nil {
			c.Errors = map[string]int{}
		}
		c.Errors[class] += n
	}
}

// CountsOf returns the counts of a run's summary.
func CountsOf(s schemas.TrialsSummary) Counts {
	return Counts{Trials: s.Trials, Graded: s.Graded, Passed: s.Passes, Ungraded: s.Ungraded,
		Missing: s.Missing, Errors: maps.Clone(s.Errors)}
}

// IsGraderClass says whether an error class is a grader's (the grader
// failed, timed out or answered nonsense) rather than the agent's or the
// harness's.
func IsGraderClass(class string) bool {
	return class == schemas.ErrGraderError || class == schemas.ErrGraderTimeout || class == schemas.ErrGraderInvalid
}

// Line says the counts in one line, as a run ends with it: "12 records,
// 10 graded, 7 passed, errors: timeout 1, grader errors 1
// (grader_timeout 1)". The graded and passed counts are left out when
// nothing was graded and no grader failed.
func (c Counts) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d records", c.Trials)
	agent, grader := map[string]int{}, map[string]int{}
	graderErrs := 0
	for class, n := range c.Errors {
		if IsGraderClass(class) {
			grader[class] = n
			graderErrs += n
		} else {
			agent[class] = n
		}
	}
	if c.Graded+graderErrs > 0 {
		fmt.Fprintf(&b, ", %d graded, %d passed", c.Graded, c.Passed)
	}
	if c.Missing > 0 {
		fmt.Fprintf(&b, ", missing %d", c.Missing)
	}
	if len(agent) > 0 {
		b.WriteString(", errors: " + ClassCounts(agent))
	}
	if graderErrs > 0 {
		fmt.Fprintf(&b, ", grader errors %d", graderErrs)
		if len(grader) > 1 || grader[schemas.ErrGraderError] == 0 {
			parts := make([]string, 0, len(grader))
			for _, class := range slices.Sorted(maps.Keys(grader)) {
				parts = append(parts, fmt.Sprintf("%s %d", class, grader[class]))
			}
			fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
		}
	}
	return b.String()
}
