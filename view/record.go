package view

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	fastjson "github.com/segmentio/encoding/json"

	"harness/schemas"
	"harness/trials"
)

// Limits on the text a row keeps (the whole text stays on disk).
const (
	excerptLen = 240
	metaLen    = 120
	messageLen = 300
	// searchLen is how much of the input and of the output the text
	// filter searches.
	searchLen = 1000
)

// Trial statuses, as the report names them.
const (
	statusPass     = "pass"
	statusFail     = "fail"
	statusError    = "error"
	statusUngraded = "ungraded"
)

// Row is what the grid shows of one trial. It holds excerpts only: the
// record itself stays on disk, found again by its location.
type Row struct {
	ID       string   `json:"id"`
	Trial    int      `json:"trial"`
	Category string   `json:"cat,omitempty"`
	Input    string   `json:"input,omitempty"`
	Output   string   `json:"output,omitempty"`
	Status   string   `json:"status"`
	Score    *float64 `json:"score,omitempty"`
	Grader   string   `json:"grader,omitempty"`
	// Checks counts the grader's checks and the failed ones; FirstFailed
	// names the first failed check.
	Checks      int    `json:"checks,omitempty"`
	Failed      int    `json:"failed,omitempty"`
	FirstFailed string `json:"firstFailed,omitempty"`
	// Error is the class of the trial's infrastructure error (the record's
	// or its grader's); ErrorMessage its message, shortened.
	Error        string `json:"error,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
	Duration     int64  `json:"duration"`
	// AgentDuration is the agent's part of Duration, the trial (which
	// holds a task's verification too).
	AgentDuration int64             `json:"agentDuration,omitempty"`
	Start         int64             `json:"start,omitempty"`
	End           int64             `json:"end,omitempty"`
	Tokens        int64             `json:"tokens,omitempty"`
	Cost          *float64          `json:"cost,omitempty"`
	Steps         int               `json:"steps"`
	Stop          string            `json:"stop,omitempty"`
	Meta          map[string]string `json:"meta,omitempty"`

	// excluded is why the trial is out of n ("" when graded).
	excluded string
	pass     bool
	agent    string
	cost     *schemas.Cost
	// metaItems holds, for a metadata key whose value is a list (tags),
	// its items as text: the filter offers and matches each.
	metaItems map[string][]string
	// hay is the lower-cased input and output, for the text filter.
	hay string
	loc location
}

// location says where a trial's record is: a byte range of a file (or of
// its decompressed copy). For a trials record it is the range of the
// trial's entry inside the case's line.
type location struct {
	file *file
	off  int64
	n    int64
}

// lineKind tells the lines of a results file apart.
type lineKind int

const (
	lineCapture lineKind = iota
	lineTrials
	lineSummary
)

// parsedLine is one record line reduced to rows.
type parsedLine struct {
	kind lineKind
	rows []*Row
	// k is the trials asked for the case (trials records).
	k    int
	id   string
	line int
}

// recordFields are the small fields of a capture record or a trial entry,
// gathered while walking it.
type recordFields struct {
	id, output, stop, excluded, reasoning string
	trial, trialNum                       int
	input                                 schemas.Turns
	meta                                  map[string]any
	timing                                schemas.Timing
	usage                                 *schemas.Usage
	err                                   *schemas.ErrorInfo
	score                                 *lightGrader // an object under "score"
	flatScore                             *float64     // a number under "score"
	graderResult, graderError             *lightGrader
	pass                                  *bool
	duration                              float64
	cost                                  *schemas.Cost
	agent                                 string
	steps                                 int
	hasTrajectory, hasTrials              bool
	typ                                   string
	k                                     int
	trialsStart, trialsEnd                int
}

// lightGrader is the part of a grader result a row needs (decoded without
// schemas.GraderResult's own decoder, which is slower): the evidence of
// checks stays on disk.
type lightGrader struct {
	Pass      bool               `json:"pass"`
	Score     float64            `json:"score"`
	Reasoning string             `json:"reasoning"`
	Reason    string             `json:"reason"`
	Grader    string             `json:"grader"`
	Error     *schemas.ErrorInfo `json:"error"`
	Checks    []struct {
		Text string `json:"text"`
		Pass bool   `json:"pass"`
	} `json:"checks"`
}

func (g *lightGrader) result() *schemas.GraderResult {
	if g == nil {
		return nil
	}
	r := &schemas.GraderResult{Pass: g.Pass, Score: g.Score, Reasoning: g.Reasoning, Grader: g.Grader, Error: g.Error}
	if r.Reasoning == "" {
		r.Reasoning = g.Reason
	}
	for _, c := range g.Checks {
		r.Checks = append(r.Checks, schemas.Check{Text: c.Text, Pass: c.Pass})
	}
	return r
}

// decodeTurns decodes an input: a string or an array of strings.
func decodeTurns(b []byte) (schemas.Turns, error) {
	switch b[0] {
	case '"':
		var s string
		err := fastjson.Unmarshal(b, &s)
		return schemas.SingleTurn(s), err
	case '[':
		var l []string
		err := fastjson.Unmarshal(b, &l)
		return schemas.Turns{List: l, Multi: true}, err
	}
	var t schemas.Turns
	err := json.Unmarshal(b, &t)
	return t, err
}

// decodeInto decodes one field value, naming the field on error.
func decodeInto(b []byte, key string, v any) error {
	if err := fastjson.Unmarshal(b, v); err != nil {
		return &schemas.InputError{Field: key, Msg: jsonText(err)}
	}
	return nil
}

func jsonText(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "json: ")
	return s
}

// walkRecord gathers the fields of the object at b (a capture record, a
// trial entry, a trials record or a summary).
func walkRecord(b []byte) (*recordFields, error) {
	f := &recordFields{}
	_, err := eachMember(b, 0, func(key []byte, vs, ve int) error {
		v := b[vs:ve]
		switch string(key) {
		case "id":
			return decodeInto(v, "id", &f.id)
		case "type":
			if v[0] == '"' {
				return decodeInto(v, "type", &f.typ)
			}
		case "trial":
			return decodeInto(v, "trial", &f.trial)
		case "trialNum":
			return decodeInto(v, "trialNum", &f.trialNum)
		case "input":
			t, err := decodeTurns(v)
			if err != nil {
				return &schemas.InputError{Field: "input", Msg: jsonText(err)}
			}
			f.input = t
		case "output":
			if v[0] == '"' {
				return decodeInto(v, "output", &f.output)
			}
		case "stopReason":
			return decodeInto(v, "stopReason", &f.stop)
		case "metadata":
			if v[0] == '{' {
				return decodeInto(v, "metadata", &f.meta)
			}
		case "timing":
			return decodeInto(v, "timing", &f.timing)
		case "usage":
			if v[0] == '{' {
				return decodeInto(v, "usage", &f.usage)
			}
		case "error":
			if v[0] == '{' {
				return decodeInto(v, "error", &f.err)
			}
		case "score":
			switch {
			case v[0] == '{':
				return decodeInto(v, "score", &f.score)
			case v[0] != 'n':
				return decodeInto(v, "score", &f.flatScore)
			}
		case "graderResult":
			if v[0] == '{' {
				return decodeInto(v, "graderResult", &f.graderResult)
			}
		case "graderError":
			if v[0] == '{' {
				return decodeInto(v, "graderError", &f.graderError)
			}
		case "pass":
			if v[0] != 'n' {
				return decodeInto(v, "pass", &f.pass)
			}
		case "reasoning":
			if v[0] == '"' {
				return decodeInto(v, "reasoning", &f.reasoning)
			}
		case "excluded":
			if v[0] == '"' {
				return decodeInto(v, "excluded", &f.excluded)
			}
		case "duration":
			if v[0] != 'n' {
				return decodeInto(v, "duration", &f.duration)
			}
		case "cost":
			if v[0] == '{' {
				return decodeInto(v, "cost", &f.cost)
			}
		case "k":
			return decodeInto(v, "k", &f.k)
		case "provenance":
			var p struct {
				AgentName    string   `json:"agentName"`
				AgentVersion string   `json:"agentVersion"`
				Command      []string `json:"command"`
			}
			if v[0] == '{' && fastjson.Unmarshal(v, &p) == nil {
				f.agent = strings.TrimSpace(p.AgentName + " " + p.AgentVersion)
				if f.agent == "" {
					f.agent = strings.Join(p.Command, " ")
				}
			}
		case "trajectory", "events":
			if string(key) == "trajectory" {
				if v[0] != '[' {
					return &schemas.InputError{Field: "trajectory", Msg: "must be an array of steps"}
				}
				f.hasTrajectory = true
			}
			if v[0] == '[' {
				n, err := countElements(v)
				if err != nil {
					return &schemas.InputError{Field: string(key), Msg: err.Error()}
				}
				f.steps += n
			}
		case "trials":
			if v[0] == '[' {
				f.hasTrials = true
				f.trialsStart, f.trialsEnd = vs, ve
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// capture returns the record as much of a capture record as decides its
// outcome, following schemas.TrialEntry.Capture for trial entries.
func (f *recordFields) capture() *schemas.CaptureRecord {
	rec := &schemas.CaptureRecord{ID: f.id, Trial: f.trial, Error: f.err, Timing: f.timing, Cost: f.cost}
	if rec.Trial == 0 {
		rec.Trial = f.trialNum
	}
	switch {
	case f.graderResult != nil:
		rec.Score = f.graderResult.result()
	case f.score != nil:
		rec.Score = f.score.result()
	case f.graderError != nil:
		rec.Score = f.graderError.result()
	case f.pass != nil:
		g := schemas.GraderResult{Pass: *f.pass, Reasoning: f.reasoning}
		if f.flatScore != nil {
			g.Score = *f.flatScore
		} else if *f.pass {
			g.Score = 1
		}
		rec.Score = &g
	}
	if rec.Timing.Total == 0 && rec.Timing.End == 0 && f.duration > 0 {
		rec.Timing.Total = int64(f.duration)
	}
	return rec
}

// row makes the grid row of a capture record or trial entry.
func (f *recordFields) row(input schemas.Turns, meta map[string]any) *Row {
	rec := f.capture()
	if len(input.List) == 0 {
		input = f.input
	}
	if meta == nil {
		meta = f.meta
	} else if f.meta != nil {
		// A trial's own metadata adds to its case's.
		merged := make(map[string]any, len(meta)+len(f.meta))
		for k, v := range meta {
			merged[k] = v
		}
		for k, v := range f.meta {
			merged[k] = v
		}
		meta = merged
	}
	r := &Row{ID: f.id, Trial: max(rec.Trial, 1), Input: excerpt(input.Text(), excerptLen), Output: excerpt(f.output, excerptLen),
		Duration: schemas.RecordDuration(rec), AgentDuration: schemas.AgentDuration(rec), Start: rec.Timing.Start, End: rec.Timing.End, Steps: f.steps, Stop: f.stop, agent: f.agent, cost: f.cost}
	pass, excluded := trials.Outcome(rec)
	r.excluded, r.pass = excluded, pass
	switch excluded {
	case "":
		r.Status = statusFail
		if pass {
			r.Status = statusPass
		}
	case trials.Ungraded:
		r.Status = statusUngraded
	default:
		r.Status = statusError
		r.Error = excluded
	}
	if g := rec.Score; g != nil {
		r.Grader = g.Grader
		if g.Error == nil {
			s := g.Score
			r.Score = &s
		}
		r.Checks = len(g.Checks)
		for _, ch := range g.Checks {
			if !ch.Pass {
				if r.Failed == 0 {
					r.FirstFailed = excerpt(ch.Text, metaLen)
				}
				r.Failed++
			}
		}
	}
	switch {
	case rec.Error != nil:
		r.ErrorMessage = excerpt(oneLine(rec.Error.Message), messageLen)
	case rec.Score != nil && rec.Score.Error != nil:
		r.ErrorMessage = excerpt(oneLine(rec.Score.Error.Message), messageLen)
	}
	switch {
	case f.cost != nil:
		r.Tokens = f.cost.Tokens()
		r.Cost = f.cost.USD
	case f.usage != nil && f.usage.TotalTokens != nil:
		r.Tokens = *f.usage.TotalTokens
	case f.usage != nil:
		if f.usage.InputTokens != nil {
			r.Tokens += *f.usage.InputTokens
		}
		if f.usage.OutputTokens != nil {
			r.Tokens += *f.usage.OutputTokens
		}
	}
	if len(meta) > 0 {
		r.Meta = make(map[string]string, len(meta))
		for k, v := range meta {
			r.Meta[excerpt(k, metaLen)] = excerpt(metaText(v), metaLen)
			if list, ok := v.([]any); ok {
				if r.metaItems == nil {
					r.metaItems = map[string][]string{}
				}
				items := make([]string, 0, len(list))
				for _, x := range list {
					items = append(items, excerpt(metaText(x), metaLen))
				}
				r.metaItems[excerpt(k, metaLen)] = items
			}
		}
		r.Category = r.Meta["category"]
	}
	r.hay = strings.ToLower(excerpt(input.Text(), searchLen) + "\n" + excerpt(f.output, searchLen))
	return r
}

// parseLine reads one line of a results file into rows. off is the line's
// offset in the file, so that each row knows where its record is.
func parseLine(b []byte, off int64, fl *file) (parsedLine, error) {
	b = bytes.TrimRight(b, " \t\r")
	if len(b) == 0 || b[0] != '{' {
		if !json.Valid(b) {
			return parsedLine{}, &schemas.InputError{Msg: schemas.NotJSONLine}
		}
		return parsedLine{}, &schemas.InputError{Msg: "not a JSON object"}
	}
	f, err := walkRecord(b)
	if err != nil {
		return parsedLine{}, err
	}
	switch {
	case f.typ == schemas.SummaryType:
		return parsedLine{kind: lineSummary}, nil
	case f.id == "":
		return parsedLine{}, &schemas.InputError{Field: "id", Msg: "missing or not a non-empty string (is this a results file?)"}
	case f.hasTrajectory:
		r := f.row(schemas.Turns{}, nil)
		r.loc = location{file: fl, off: off, n: int64(len(b))}
		return parsedLine{kind: lineCapture, rows: []*Row{r}, id: f.id}, nil
	case f.hasTrials:
		pl := parsedLine{kind: lineTrials, k: f.k, id: f.id}
		_, err := eachElement(b, f.trialsStart, func(vs, ve int) error {
			tf, err := walkRecord(b[vs:ve])
			if err != nil {
				return err
			}
			if tf.id == "" {
				tf.id = f.id
			}
			if tf.trial == 0 && tf.trialNum == 0 {
				tf.trialNum = len(pl.rows) + 1
			}
			r := tf.row(f.input, f.meta)
			r.ID = f.id
			r.loc = location{file: fl, off: off + int64(vs), n: int64(ve - vs)}
			pl.rows = append(pl.rows, r)
			return nil
		})
		if err != nil {
			return parsedLine{}, &schemas.InputError{Field: "trials", Msg: err.Error()}
		}
		return pl, nil
	}
	return parsedLine{}, &schemas.InputError{Field: "trajectory", Msg: "missing: neither a capture record (id, trajectory) nor a trials record (id, trials) nor a trials summary"}
}

// excerpt cuts s to at most n bytes on a rune boundary, marking the cut.
func excerpt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// metaText is a metadata value as text: strings as they are, the rest as
// JSON.
func metaText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
