package review

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"harness/schemas"
	"harness/trials"
)

// gradedTrial is what CompareGradings keeps of one trial of a file.
type gradedTrial struct {
	key     trialKey
	print   string // what makes it the same trajectory
	pass    bool
	score   float64
	verdict bool // it has one
	grader  string
}

type trialKey struct {
	id    string
	trial int
}

// readGradings reads every trial of a results file.
func readGradings(name string, r io.Reader) ([]gradedTrial, error) {
	var out []gradedTrial
	_, err := EachRecord(name, r, func(_ int, rec *schemas.CaptureRecord) error {
		if rec.Timing.Start == 0 {
			// Not the record of a run (it has no start time): nothing
			// tells its trial apart from another run's.
			return errNotRun
		}
		pass, excluded := trials.Outcome(rec)
		t := gradedTrial{key: trialKey{rec.ID, rec.Trial}, print: fingerprint(rec), pass: pass, verdict: excluded == ""}
		if rec.Score != nil {
			t.grader = rec.Score.Grader
			if t.verdict {
				t.score = rec.Score.Score
			}
		}
		out = append(out, t)
		return nil
	})
	return out, err
}

// errNotRun stops reading a file whose records are not those of a run.
var errNotRun = errors.New("not the records of a run")

// fingerprint is what two gradings of one trial share: the case, the
// trial, the answer, the times and the steps (harness grade keeps them all
// byte for byte).
func fingerprint(rec *schemas.CaptureRecord) string {
	return fmt.Sprintf("%q %d %q %d %d %d %q", rec.ID, rec.Trial, rec.Output, rec.Timing.Start, rec.Timing.End, len(rec.Trajectory), rec.StopReason)
}

// CompareGradings reads two results files and, when they hold the same
// trials (the same cases, trial numbers, start times and trajectories: one
// run graded twice), says how B's verdicts agree with A's trial by trial. same is
// false, with no report, when the files hold different trials (two runs).
func CompareGradings(nameA string, a io.Reader, nameB string, b io.Reader) (rep schemas.GraderAgreement, same bool, err error) {
	ta, err := readGradings(nameA, a)
	if errors.Is(err, errNotRun) {
		return rep, false, nil
	} else if err != nil {
		return rep, false, err
	}
	tb, err := readGradings(nameB, b)
	if errors.Is(err, errNotRun) {
		return rep, false, nil
	} else if err != nil {
		return rep, false, err
	}
	if len(ta) == 0 || len(ta) != len(tb) {
		return rep, false, nil
	}
	byKey := make(map[trialKey]*gradedTrial, len(tb))
	for i := range tb {
		byKey[tb[i].key] = &tb[i]
	}
	rep = schemas.GraderAgreement{Type: schemas.GraderAgreementType, Trials: len(ta), Flipped: []schemas.FlippedTrial{}}
	sideA, sideB := gradingSide{file: nameA}, gradingSide{file: nameB}
	var va, vb []string
	change := 0.0
	for i := range ta {
		x := &ta[i]
		y := byKey[x.key]
		if y == nil || y.print != x.print {
			return schemas.GraderAgreement{}, false, nil
		}
		sideA.add(x)
		sideB.add(y)
		if !x.verdict || !y.verdict {
			rep.NoVerdict++
			continue
		}
		rep.Compared++
		va, vb = append(va, verdictWord(x.pass)), append(vb, verdictWord(y.pass))
		change += y.score - x.score
		if y.score != x.score {
			rep.ScoreChanged++
		}
		if x.pass == y.pass {
			rep.Agree++
			continue
		}
		rep.Flipped = append(rep.Flipped, schemas.FlippedTrial{ID: x.key.id, Trial: x.key.trial,
			A: verdictWord(x.pass), B: verdictWord(y.pass), ScoreA: x.score, ScoreB: y.score})
	}
	if rep.Compared > 0 {
		rep.MeanScoreChange = change / float64(rep.Compared)
	}
	if rep.Kappa, err = trials.CohenKappa(va, vb, []string{"pass", "fail"}); err != nil {
		return rep, false, err
	}
	rep.A, rep.B = sideA.done(), sideB.done()
	return rep, true, nil
}

// gradingSide sums one side's verdicts.
type gradingSide struct {
	file           string
	graders        map[string]bool
	graded, passed int
	scoreSum       float64
}

func (s *gradingSide) add(t *gradedTrial) {
	if t.grader != "" {
		if s.graders == nil {
			s.graders = map[string]bool{}
		}
		s.graders[t.grader] = true
	}
	if !t.verdict {
		return
	}
	s.graded++
	s.scoreSum += t.score
	if t.pass {
		s.passed++
	}
}

func (s *gradingSide) done() schemas.GradingSide {
	g := schemas.GradingSide{File: s.file, Graders: slices.Sorted(maps.Keys(s.graders)), Graded: s.graded, Passed: s.passed}
	if g.Graders == nil {
		g.Graders = []string{}
	}
	if s.graded > 0 {
		g.MeanScore = s.scoreSum / float64(s.graded)
	}
	return g
}

// WriteGraderAgreementText writes the agreement of two gradings for people.
func WriteGraderAgreementText(w io.Writer, rep schemas.GraderAgreement) error {
	var b strings.Builder
	fmt.Fprintf(&b, "The two files hold the same %d trials: comparing their graders trial by trial (B − A), not two runs.\n\n", rep.Trials)
	for _, s := range []struct {
		name string
		side schemas.GradingSide
	}{{"A", rep.A}, {"B", rep.B}} {
		graders := strings.Join(s.side.Graders, ", ")
		if graders == "" {
			graders = "no grader"
		}
		rate := "-"
		if s.side.Graded > 0 {
			rate = fmt.Sprintf("%.3f", float64(s.side.Passed)/float64(s.side.Graded))
		}
		fmt.Fprintf(&b, "%s: %s (%s): %d graded, %d passed, pass rate %s, mean score %.3f\n", s.name, s.side.File, graders, s.side.Graded, s.side.Passed, rate, s.side.MeanScore)
	}
	fmt.Fprintf(&b, "\nVerdicts compared: %d", rep.Compared)
	if rep.NoVerdict > 0 {
		fmt.Fprintf(&b, " (%d without a verdict on one side left out)", rep.NoVerdict)
	}
	fmt.Fprintf(&b, "; agree on %d, flipped %d\n", rep.Agree, len(rep.Flipped))
	if k := rep.Kappa.Kappa; k != nil {
		fmt.Fprintf(&b, "Cohen's kappa between the graders: %.3f (observed agreement %.3f, expected by chance %.3f)\n", *k, rep.Kappa.Observed, rep.Kappa.Expected)
	} else {
		fmt.Fprintf(&b, "Cohen's kappa between the graders: undefined (%s)\n", rep.Kappa.Note)
	}
	fmt.Fprintf(&b, "Score change: mean %+.3f; %d trial(s) scored differently\n", rep.MeanScoreChange, rep.ScoreChanged)
	if len(rep.Flipped) > 0 {
		b.WriteString("\nFlipped:\n")
		for _, f := range rep.Flipped {
			fmt.Fprintf(&b, "  %s#%d  %s -> %s  (score %s -> %s)\n", f.ID, f.Trial, f.A, f.B, jsNumber(f.ScoreA), jsNumber(f.ScoreB))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteGraderAgreementCSV writes one row per flipped trial.
func WriteGraderAgreementCSV(w io.Writer, rep schemas.GraderAgreement) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"id", "trial", "a", "b", "scoreA", "scoreB"})
	for _, f := range rep.Flipped {
		cw.Write([]string{f.ID, strconv.Itoa(f.Trial), f.A, f.B, jsNumber(f.ScoreA), jsNumber(f.ScoreB)})
	}
	cw.Flush()
	return cw.Error()
}
