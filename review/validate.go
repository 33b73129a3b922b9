package review

import (
	"context"

	"harness/schemas"
)

// RefRecord is the record a grader sees for a reference answer: the case's
// input, expected, hint and metadata, with the answer as if the agent had
// given it (schemas.AnsweredRecord): the output, the final message of the
// conversation and its one trajectory step.
func RefRecord(c *schemas.PromptCase, answer string) schemas.CaptureRecord {
	r := schemas.AnsweredRecord(c.ID, c.Input, answer)
	r.Expected, r.Hint, r.Reference = c.Expected, c.Hint, c.Reference
	if c.Metadata != nil {
		r.Metadata = c.Metadata
	}
	return r
}

// ValidateStats counts what ValidateRefs did.
type ValidateStats struct {
	Checked   int      // answers graded
	Misjudged int      // graded the wrong way, or not graded (grader error)
	Skipped   int      // cases with neither reference nor negativeReference
	Failing   []string // "id (reference)" / "id (negativeReference)" of misjudged answers
}

// ValidateRefs grades every case's reference (which must pass) and
// negativeReference (which must fail) and hands each result to fn in case
// order, reference first. A grader error counts as misjudged.
func ValidateRefs(ctx context.Context, cases []schemas.PromptCase, grade GradeFunc, fn func(schemas.ValidationResult) error) (ValidateStats, error) {
	var st ValidateStats
	for i := range cases {
		c := &cases[i]
		if c.Reference == "" && c.NegativeReference == "" {
			st.Skipped++
			continue
		}
		for _, ref := range []struct {
			kind, text, want string
		}{{schemas.RefPositive, c.Reference, "pass"}, {schemas.RefNegative, c.NegativeReference, "fail"}} {
			if ref.text == "" {
				continue
			}
			if err := ctx.Err(); err != nil {
				return st, err
			}
			rec := RefRecord(c, ref.text)
			g := grade(ctx, &rec, c)
			v := schemas.ValidationResult{ID: c.ID, Reference: ref.text, Passes: g.Pass && g.Error == nil,
				GraderResult: g, Kind: ref.kind, Want: ref.want}
			v.Correct = g.Error == nil && v.Passes == (ref.want == "pass")
			st.Checked++
			if !v.Correct {
				st.Misjudged++
				st.Failing = append(st.Failing, c.ID+" ("+ref.kind+")")
			}
			if err := fn(v); err != nil {
				return st, err
			}
		}
	}
	return st, nil
}
