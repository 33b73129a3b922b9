// Package review holds the offline views of prompts and results that help a
// person judge a run and its graders: compact summaries and markdown of
// trajectories (summarize), samples of failures and grader health
// (calibrate), the category balance of a prompt set (balance) and the check
// that reference answers pass and negative references fail (validate-refs).
//
// Nothing here runs an agent. Grading is passed in as a GradeFunc, so the
// package does not depend on how graders are built.
package review

import (
	"context"
	"fmt"
	"io"

	"harness/schemas"
)

// GradeFunc grades one record for a case (the case may be nil). It reports
// grader failures on the result's Error, never as a Go error.
type GradeFunc func(ctx context.Context, rec *schemas.CaptureRecord, c *schemas.PromptCase) schemas.GraderResult

// EachRecord streams every trial of a results file as a capture record: the
// records of a capture file as they are, and the entries of each trials
// record of a trials file (with the case's id, input and expected filled in
// where the entry lacks them, as acp-harness entries do). Summary lines are
// skipped. It returns the file's kind.
func EachRecord(name string, r io.Reader, fn func(line int, rec *schemas.CaptureRecord) error) (string, error) {
	return eachRecord(schemas.ReadResults, name, r, fn)
}

// EachRecordBrief is EachRecord with trajectory steps cut to their type,
// step id and name, for views that need no more (it reads faster).
func EachRecordBrief(name string, r io.Reader, fn func(line int, rec *schemas.CaptureRecord) error) (string, error) {
	return eachRecord(schemas.ReadResultsBrief, name, r, fn)
}

func eachRecord(read func(string, io.Reader, func(schemas.ResultLine) error) (string, error), name string, r io.Reader, fn func(line int, rec *schemas.CaptureRecord) error) (string, error) {
	return read(name, r, func(l schemas.ResultLine) error {
		switch l.Kind {
		case schemas.KindCapture:
			return fn(l.Line, l.Capture)
		case schemas.KindTrials:
			for _, rec := range TrialCaptures(l.Trials) {
				if err := fn(l.Line, &rec); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// TrialCaptures returns the trials of a trials record as capture records.
func TrialCaptures(tr *schemas.TrialsRecord) []schemas.CaptureRecord {
	out := make([]schemas.CaptureRecord, 0, len(tr.Trials))
	for i := range tr.Trials {
		rec := tr.Trials[i].Capture()
		if rec.ID == "" {
			rec.ID = tr.ID
		}
		if len(rec.Input.List) == 0 {
			rec.Input = tr.Input
		}
		if rec.Expected == "" {
			rec.Expected = tr.Expected
		}
		if rec.Hint == "" {
			rec.Hint = tr.Hint
		}
		if rec.Metadata == nil && tr.Metadata != nil {
			rec.Metadata = tr.Metadata
		}
		if rec.Trial == 0 {
			rec.Trial = i + 1
		}
		out = append(out, rec)
	}
	return out
}

func verdict(g *schemas.GraderResult) string {
	if g.Error != nil {
		return fmt.Sprintf("ERROR (%s)", g.Error.Class)
	}
	if g.Pass {
		return "PASS"
	}
	return "FAIL"
}
