package evaluation

import (
	"cmp"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"harness/results"
	"harness/schemas"
	"harness/trials"
)

// resumeCapture continues an output of capture records as
// results.Output.ResumeCapture does (ungraded records returned to be
// graded), counting the records it keeps into
// counts and refusing records graded by other graders than graders (this
// run's), whose verdicts would be mixed with this run's.
//
// A record of a case whose content changed since it was written is
// refused (a *ChangedCasesError naming the cases, the output left with
// them), or with versions.rerun taken out, its unit run again.
//
// A unit run again for its failure carries what its record was as failed
// attempts (carried), so the new record keeps them.
func resumeCapture(out *results.Output, retryErrors bool, graders []string, versions *caseVersions, counts *trials.Counts, carried map[results.UnitKey][]schemas.Attempt) (map[results.UnitKey]bool, map[results.UnitKey]*schemas.CaptureRecord, error) {
	done := map[results.UnitKey]bool{}
	ungraded := map[results.UnitKey]*schemas.CaptureRecord{}
	check := graderCheck{file: out.Name(), want: graders}
	var kept trials.Counts
	_, err := out.Resume(func(line []byte) bool {
		key, e, ok := results.RecordKeyError(line)
		if !ok || done[key] {
			return false
		}
		if versions.stale(key.ID, lineCaseHash(line)) {
			if versions.rerun {
				return false
			}
			versions.note(key.ID)
			return true // left as it was: the resume is refused
		}
		class := ""
		if e != nil {
			class = e.Class
		}
		if rec := results.UngradedRecord(line, class); rec != nil {
			if ungraded[key] == nil {
				ungraded[key] = rec
			}
			return false
		}
		if results.Rerun(e, retryErrors) {
			carry(carried, key, line)
			return false
		}
		done[key] = true
		var rec schemas.CaptureRecord
		if json.Unmarshal(line, &rec) == nil {
			check.see(key.ID, key.Trial, rec.Provenance.Graders)
			kept.Add(&rec, trials.Counting{})
		}
		return true
	})
	if err == nil {
		err = cmp.Or(versions.err(out.Name()), check.err)
	}
	if err != nil {
		return nil, nil, err
	}
	for k := range done {
		delete(ungraded, k)
	}
	counts.Merge(kept)
	return done, ungraded, nil
}

// carry keeps the record of a unit that runs again as its failed
// attempts (an interrupted one is no attempt: the run stopped it).
func carry(carried map[results.UnitKey][]schemas.Attempt, key results.UnitKey, line []byte) {
	var rec schemas.CaptureRecord
	if carried == nil || json.Unmarshal(line, &rec) != nil {
		return
	}
	carryRecord(carried, key, &rec)
}

func carryRecord(carried map[results.UnitKey][]schemas.Attempt, key results.UnitKey, rec *schemas.CaptureRecord) {
	if carried == nil || rec.Error == nil {
		return
	}
	if rec.Error.Class == schemas.ErrInterrupted {
		if len(rec.Attempts) > 0 {
			carried[key] = rec.Attempts
		}
		return
	}
	carried[key] = rec.AsAttempts(0)
}

// graderCheck refuses to resume an output whose records other graders
// graded than this run's: one output, one set of graders.
type graderCheck struct {
	file string
	want []string
	err  error
}

// see checks the graders of one record (case id, trial) an earlier run
// wrote; the first that differs is kept as the error.
func (g *graderCheck) see(id string, trial int, graders []string) {
	if g.err != nil || sameGraders(graders, g.want) {
		return
	}
	where := ""
	if g.file != "" {
		where = g.file + ": "
	}
	g.err = fmt.Errorf("%scase %q trial %d was %s, and this run %s: resuming would mix their verdicts in one output; resume with the same graders, write a new output, or regrade the output with harness grade",
		where, id, max(trial, 1), gradedBy(graders, "graded by", "not graded (no grader)"), gradedBy(g.want, "grades with", "has no grader"))
}

// sameGraders says whether two runs' grader lists name the same graders,
// in any order, wherever their files were named from: a grader's name is
// its kind and file ("exec:./check.sh", "cases:suite.yaml#words"), and a
// resumed run may spell the file's directory another way (a suite's run
// names it by its absolute path).
func sameGraders(a, b []string) bool {
	canonical := func(names []string) []string {
		out := make([]string, len(names))
		for i, n := range names {
			kind, file, ok := strings.Cut(n, ":")
			if !ok {
				out[i] = n
				continue
			}
			file, frag, _ := strings.Cut(file, "#")
			out[i] = kind + ":" + filepath.Base(file) + "#" + frag
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(canonical(a), canonical(b))
}

func gradedBy(names []string, verb, none string) string {
	if len(names) == 0 {
		return none
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = fmt.Sprintf("%q", n)
	}
	return verb + " " + strings.Join(quoted, ", ")
}
