package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	fastjson "github.com/segmentio/encoding/json"
)

// Kinds of results files and lines.
const (
	KindCapture = "capture"   // capture records, one per case per trial
	KindTrials  = "trials"    // trials records, one per case
	KindSummary = SummaryType // a TrialsSummary line (allowed in a trials file)
)

// ResultLine is one decoded line of a results file: exactly one of Capture,
// Trials and Summary is set, as Kind says.
type ResultLine struct {
	Line    int
	Kind    string
	Capture *CaptureRecord
	Trials  *TrialsRecord
	Summary *TrialsSummary
}

// ReadResults streams the lines of a results file (capture records, or
// trials records optionally followed by summary lines) to fn, and returns
// the file's kind (KindCapture or KindTrials; "" for a file with no
// records). A line that is not a record, or a record of the other kind than
// the lines before it, stops the read with an *InputError naming the file,
// the line and the field.
func ReadResults(name string, r io.Reader, fn func(ResultLine) error) (string, error) {
	return readResults(name, r, ParseResultLine, fn)
}

// ReadResultsBrief is ReadResults for views that need of each trajectory
// step only its type, step id and name (see ParseResultLineBrief): it reads
// capture files several times faster.
func ReadResultsBrief(name string, r io.Reader, fn func(ResultLine) error) (string, error) {
	return readResults(name, r, ParseResultLineBrief, fn)
}

func readResults(name string, r io.Reader, parse func([]byte) (ResultLine, error), fn func(ResultLine) error) (string, error) {
	kind := ""
	firstLine := 0
	// Lines harness wrote carry an integrity field: a file is all signed
	// or (older, or from another tool) all unsigned, never a mix.
	firstSigned, signedLine := false, 0
	err := EachLineEnd(r, func(lineNo int, line []byte, unterminated bool) error {
		if unterminated && !json.Valid(line) {
			return &InputError{File: name, Line: lineNo, Msg: TornLine}
		}
		_, _, signed := SplitIntegrity(line)
		switch {
		case signedLine == 0:
			firstSigned, signedLine = signed, lineNo
		case signed != firstSigned && !json.Valid(bytes.TrimSpace(line)):
			// Not a record at all: say that, not that it is unsigned.
			return &InputError{File: name, Line: lineNo, Msg: NotJSONLine}
		case signed != firstSigned:
			what := map[bool]string{true: "signed by harness (it has an integrity field)", false: "not signed by harness (it has no integrity field)"}
			return &InputError{File: name, Line: lineNo, Field: IntegrityField, Msg: fmt.Sprintf(
				"this line is %s but line %d is %s: a line was added or changed by something else than harness", what[signed], signedLine, what[firstSigned])}
		}
		rl, err := parse(line)
		if err != nil {
			var ie *InputError
			if errors.As(err, &ie) {
				ie.File, ie.Line = name, lineNo
				return ie
			}
			return &InputError{File: name, Line: lineNo, Msg: err.Error()}
		}
		rl.Line = lineNo
		if rl.Kind != KindSummary {
			switch {
			case kind == "":
				kind, firstLine = rl.Kind, lineNo
			case kind != rl.Kind:
				return &InputError{File: name, Line: lineNo, Msg: fmt.Sprintf(
					"mixed formats: this line is a %s record but line %d is a %s record; a results file holds one kind",
					rl.Kind, firstLine, kind)}
			}
		} else if kind == KindCapture {
			return &InputError{File: name, Line: lineNo, Field: "type",
				Msg: fmt.Sprintf("a trials summary in a file of capture records (line %d)", firstLine)}
		}
		return fn(rl)
	})
	if err != nil {
		var ie *InputError
		if errors.As(err, &ie) {
			return kind, err
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			// A compressed stream that ends inside a frame.
			return kind, &InputError{File: name, Msg: "the file is torn: it ends in the middle of a compressed frame, as a run stopped while writing it leaves it; resuming the run drops what was cut short and runs it again"}
		}
		return kind, fmt.Errorf("%s: %w", name, err)
	}
	return kind, nil
}

// NotJSONLine says what is wrong with a line that is not JSON in the
// middle of a results file.
const NotJSONLine = "not JSON: a results file holds one JSON record a line, and this line is none (text added to the file, or a record cut short, by something else than harness)"

// TornLine says what is wrong with a last line cut short (no newline at
// its end, and not whole JSON) and what to do about it.
const TornLine = "the last line is torn: cut short (no newline at its end, and not whole JSON), as a run stopped while writing it leaves it, not changed by anything else; " +
	"resuming the run drops it and runs its unit again, or delete the line to read the records before it"

// ParseResultLine decodes one line of a results file, telling the kinds
// apart: "type":"trials-summary" is a summary; an object with a "trials"
// array and no "trajectory" is a trials record; an object with an id and a
// "trajectory" array is a capture record (graded or not). Anything else is
// an *InputError: a line of unknown shape is never read as an empty record.
func ParseResultLine(line []byte) (ResultLine, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		if !json.Valid(line) {
			return ResultLine{}, &InputError{Msg: NotJSONLine}
		}
		return ResultLine{}, &InputError{Msg: "not a JSON object"}
	}
	// Fast path: every capture record has a trajectory, and trials records
	// and summaries have none.
	var cr CaptureRecord
	if err := fastjson.Unmarshal(line, &cr); err == nil && cr.Trajectory != nil && cr.ID != "" {
		return ResultLine{Kind: KindCapture, Capture: &cr}, nil
	}
	var probe struct {
		Type       string          `json:"type"`
		ID         json.RawMessage `json:"id"`
		Trials     presence        `json:"trials"`
		Trajectory presence        `json:"trajectory"`
	}
	if err := fastjson.Unmarshal(line, &probe); err != nil {
		return ResultLine{}, &InputError{Msg: "not a JSON object: " + jsonErrText(err)}
	}
	if probe.Type == SummaryType {
		var s TrialsSummary
		if err := fastjson.Unmarshal(line, &s); err != nil {
			return ResultLine{}, decodeErr("trials summary", err)
		}
		return ResultLine{Kind: KindSummary, Summary: &s}, nil
	}
	var id string
	if json.Unmarshal(probe.ID, &id) != nil || id == "" {
		return ResultLine{}, &InputError{Field: "id", Msg: "missing or not a non-empty string (is this a results file?)"}
	}
	if probe.Trials.set && !probe.Trajectory.set {
		if probe.Trials.first != '[' {
			return ResultLine{}, &InputError{Field: "trials", Msg: "must be an array of trial entries"}
		}
		var tr TrialsRecord
		if err := fastjson.Unmarshal(line, &tr); err != nil {
			return ResultLine{}, decodeErr("trials record", err)
		}
		return ResultLine{Kind: KindTrials, Trials: &tr}, nil
	}
	if !probe.Trajectory.set {
		return ResultLine{}, &InputError{Field: "trajectory", Msg: "missing: neither a capture record (id, trajectory) nor a trials record (id, trials) nor a trials summary"}
	}
	if probe.Trajectory.first != '[' {
		return ResultLine{}, &InputError{Field: "trajectory", Msg: "must be an array of steps"}
	}
	if err := json.Unmarshal(line, &cr); err != nil {
		return ResultLine{}, decodeErr("capture record", err)
	}
	return ResultLine{Kind: KindCapture, Capture: &cr}, nil
}

// briefStep is the part of a trajectory step brief views read.
type briefStep struct {
	Type   string `json:"type"`
	StepID string `json:"stepId"`
	Name   string `json:"name"`
}

// ParseResultLineBrief is ParseResultLine keeping, of each trajectory step
// of a capture record, only its type, stepId and name; the other kinds of
// line come back whole.
func ParseResultLineBrief(line []byte) (ResultLine, error) {
	var brief struct {
		recordFields
		Trajectory  []briefStep   `json:"trajectory"`
		Events      []briefStep   `json:"events"`
		GraderError *GraderResult `json:"graderError"`
	}
	line = bytes.TrimSpace(line)
	if len(line) > 0 && line[0] == '{' && fastjson.Unmarshal(line, &brief) == nil && brief.Trajectory != nil && brief.ID != "" {
		cr := CaptureRecord(brief.recordFields)
		if cr.Score == nil {
			// A grader error is read back as the full reader reads it.
			cr.Score = brief.GraderError
		}
		cr.Trajectory = make([]Step, len(brief.Trajectory))
		for i, st := range brief.Trajectory {
			cr.Trajectory[i] = Step{Type: st.Type, StepID: st.StepID, Name: st.Name}
		}
		if len(brief.Events) > 0 {
			events := make([]Step, len(brief.Events))
			for i, st := range brief.Events {
				events[i] = Step{Type: st.Type, StepID: st.StepID, Name: st.Name}
			}
			cr.Trajectory = mergeSteps(cr.Trajectory, events)
		}
		return ResultLine{Kind: KindCapture, Capture: &cr}, nil
	}
	return ParseResultLine(line)
}

// presence notes that a field was there, and its first byte, without
// keeping its value.
type presence struct {
	set   bool
	first byte
}

// UnmarshalJSON records the field's presence.
func (p *presence) UnmarshalJSON(b []byte) error {
	p.set, p.first = true, b[0]
	return nil
}

func decodeErr(what string, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return &InputError{Field: strings.TrimPrefix(te.Field, "recordFields."), Msg: fmt.Sprintf("%s: must be %s, not a JSON %s", what, jsonKind(te.Type), te.Value)}
	}
	return &InputError{Msg: what + ": " + jsonErrText(err)}
}

// jsonKind says which JSON value a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "an object"
}
