package evaluation

import (
	"context"
	"io"
	"math/rand/v2"
	"os"

	"harness/graders"
	"harness/schemas"
	"harness/workspace"
)

// CountRecords reads every line of a results file (capture, graded or
// trials records; summary lines are skipped), checks each, and counts the
// records. A bad line, or a file with no record, is a *schemas.InputError.
func CountRecords(src Source) (int, error) {
	r, err := src.Open()
	if err != nil {
		return 0, err
	}
	defer r.Close()
	n := 0
	_, err = schemas.ReadResults(src.Name, r, func(rl schemas.ResultLine) error {
		if rl.Kind != schemas.KindSummary {
			n++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, &schemas.InputError{File: src.Name, Msg: "no records (the file is empty)"}
	}
	return n, nil
}

// Sample chooses n of total records (by index, 0 first) at random from
// seed, for RegradeOptions.Chosen; the same seed chooses the same records.
func Sample(total, n int, seed uint64) func(index int) bool {
	rng := rand.New(rand.NewPCG(seed, 0x6861726e657373))
	chosen := map[int]bool{}
	for _, i := range rng.Perm(total)[:min(n, total)] {
		chosen[i] = true
	}
	return func(i int) bool { return chosen[i] }
}

// RebuildFrom remakes a record's workspace from the template directory
// and the changes the record holds, in a new temporary directory, for
// RegradeOptions.Rebuild.
func RebuildFrom(template string) func(rec *schemas.CaptureRecord) (string, func(), error) {
	return func(rec *schemas.CaptureRecord) (string, func(), error) {
		dir, err := os.MkdirTemp("", "harness-rebuilt-")
		if err != nil {
			return "", nil, err
		}
		if err := workspace.Rebuild(template, rec.Workspace, dir); err != nil {
			os.RemoveAll(dir)
			return "", nil, err
		}
		return dir, func() { os.RemoveAll(dir) }, nil
	}
}

// CasesByID indexes prompt cases by id, for RegradeOptions.Cases.
func CasesByID(list []schemas.PromptCase) map[string]*schemas.PromptCase {
	m := make(map[string]*schemas.PromptCase, len(list))
	for i := range list {
		m[list[i].ID] = &list[i]
	}
	return m
}

// SingleShot is one agent output to grade without a stored record.
type SingleShot struct {
	// Output is the agent's answer; Input the prompt it answers.
	Output, Input string
	// Expected and Hint are the case's expected answer and grading hint.
	Expected, Hint string
}

// GradeSingle grades one synthetic record made of s (case "single", trial
// 1, one message step) with g.
func GradeSingle(ctx context.Context, g graders.Grader, s SingleShot, prov schemas.Provenance) schemas.GraderResult {
	r := schemas.AnsweredRecord("single", schemas.SingleTurn(s.Input), s.Output)
	r.Expected, r.Hint, r.Provenance = s.Expected, s.Hint, prov
	rec := &r
	return g.Grade(ctx, &graders.Input{Record: rec})
}

// OpenSources are named results files as sources, each opened with open.
func OpenSources(names []string, open func(name string) (io.ReadCloser, error)) []Source {
	sources := make([]Source, len(names))
	for i, name := range names {
		sources[i] = Source{Name: name, Open: func() (io.ReadCloser, error) { return open(name) }}
	}
	return sources
}
