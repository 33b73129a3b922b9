package schemas

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	fastjson "github.com/segmentio/encoding/json"
)

// FormatVersion is the version of the capture record format harness
// writes. Version 2 keeps in "trajectory" only the step kinds the
// TypeScript acp-harness knows (thought, message, tool_call, plan, in its
// shapes), so its schemas accept the records, and puts every other step
// (permissions, fs, terminals, usage, modes, unknown updates...) in
// "events"; both carry the same stepId sequence, so the full order can be
// rebuilt. A grader result that is an error goes in "graderError", never in
// "score". Version 1 (no "format" field) had every step in "trajectory";
// it is read as well.
const FormatVersion = 2

// PeerStep reports whether a step type is one the acp-harness trajectory
// schema knows.
func PeerStep(t string) bool {
	switch t {
	case StepThought, StepMessage, StepToolCall, StepPlan:
		return true
	}
	return false
}

// recordFields is CaptureRecord without its JSON methods.
type recordFields CaptureRecord

// recordWire is a capture record as written.
type recordWire struct {
	recordFields
	Events []Step `json:"events,omitempty"`
	// GraderError holds a grader result that is an error (the grader
	// crashed, timed out or answered nonsense). It is kept out of "score"
	// because acp-harness pipelines read a score object as a verdict and
	// would count the crash as a failure.
	GraderError *GraderResult `json:"graderError,omitempty"`
	Format      int           `json:"format,omitempty"`
}

// GraderOutcome is where a record's grader result is written: a verdict
// under "score", an error under "graderError", never both. It is the one
// rule every writer of grader outcomes follows (a capture record written
// whole, a results line regraded in place), so a line regraded after its
// grader errored loses the old "graderError" and the other way round.
func GraderOutcome(res *GraderResult) (score, graderError *GraderResult) {
	if res == nil {
		return nil, nil
	}
	if res.Error != nil {
		return nil, res
	}
	return res, nil
}

// MarshalJSON writes the record in the current format: the peer's step
// kinds in trajectory, the others in events.
func (r CaptureRecord) MarshalJSON() ([]byte, error) {
	w := recordWire{recordFields: recordFields(r), Format: FormatVersion}
	w.Score, w.GraderError = GraderOutcome(r.Score)
	w.Trajectory = make([]Step, 0, len(r.Trajectory))
	for _, s := range r.Trajectory {
		if !PeerStep(s.Type) {
			w.Events = append(w.Events, s)
			continue
		}
		if s.Type == StepToolCall && s.Name == "" {
			// The peer requires a name; the title is the name when the
			// agent sent one.
			s.Name = s.ToolName
			if s.Name == "" {
				s.Name = s.ToolCallID
			}
		}
		w.Trajectory = append(w.Trajectory, s)
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads a record of any format version, putting every step
// back in one trajectory in the order of the steps' sequence numbers.
func (r *CaptureRecord) UnmarshalJSON(b []byte) error {
	var w recordWire
	if err := fastjson.Unmarshal(b, &w); err != nil {
		// Bad input is rare: the standard decoder says what is wrong
		// more clearly.
		if err := json.Unmarshal(b, &w); err != nil {
			return err
		}
		return err
	}
	*r = CaptureRecord(w.recordFields)
	if r.Score == nil && w.GraderError != nil {
		r.Score = w.GraderError
	}
	if len(w.Events) > 0 {
		r.Trajectory = mergeSteps(r.Trajectory, w.Events)
	}
	return nil
}

// mergeSteps puts two step lists back in one, ordered by the "-s<n>"
// suffix of their step ids (steps without one keep their place after the
// numbered ones of their list).
func mergeSteps(a, b []Step) []Step {
	all := append(append(make([]Step, 0, len(a)+len(b)), a...), b...)
	sort.SliceStable(all, func(i, j int) bool { return stepSeq(all[i].StepID) < stepSeq(all[j].StepID) })
	return all
}

// stepSeq is the sequence number of a step id "<id>-t<trial>-s<n>".
func stepSeq(id string) int {
	i := strings.LastIndex(id, "-s")
	if i < 0 {
		return 1 << 30
	}
	n, err := strconv.Atoi(id[i+2:])
	if err != nil {
		return 1 << 30
	}
	return n
}
