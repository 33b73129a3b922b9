package review

import (
	"encoding/csv"
	"encoding/json"
	"io"
	"strconv"
	"strings"

	"harness/results"
	"harness/schemas"
)

// View is one of the views of a results file harness summarize writes.
type View int

const (
	// ViewCompact is one JSONL line per trial (Summarize).
	ViewCompact View = iota
	// ViewCSV is the compact view as CSV, one row per record.
	ViewCSV
	// ViewMarkdown is markdown per trial (WriteMarkdown).
	ViewMarkdown
	// ViewAggregate is the table per case and of pass@k (WriteAggregate).
	ViewAggregate
	// ViewAggregateJSON is the trials summary record as indented JSON.
	ViewAggregateJSON
)

// ViewOptions configure WriteView.
type ViewOptions struct {
	View View
	// Seed and Resamples drive the bootstrap of the aggregate views.
	Seed      uint64
	Resamples int
	// OutName names the output; a .zst or .gz suffix compresses the
	// compact JSONL view.
	OutName string
}

// WriteView writes a view of the results file in (named name in errors)
// to out. A file with no record, or a bad line, is a *schemas.InputError.
func WriteView(out io.Writer, in io.Reader, name string, opts ViewOptions) error {
	switch opts.View {
	case ViewAggregate, ViewAggregateJSON:
		rows, sum, _, err := Aggregate(name, in, opts.Seed, opts.Resamples)
		if err != nil {
			return err
		}
		if opts.View == ViewAggregateJSON {
			enc := json.NewEncoder(out)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			return enc.Encode(sum)
		}
		return WriteAggregate(out, rows, sum)
	case ViewMarkdown:
		return eachNonEmpty(EachRecord, name, in, func(rec *schemas.CaptureRecord) error {
			return WriteMarkdown(out, rec)
		})
	case ViewCSV:
		return writeCompactCSV(out, in, name)
	}
	w, err := results.NewWriter(opts.OutName, out)
	if err != nil {
		return err
	}
	err = eachNonEmpty(EachRecordBrief, name, in, func(rec *schemas.CaptureRecord) error {
		return w.Write(Summarize(rec))
	})
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return err
}

// eachNonEmpty passes every record of in, read with each, to fn; a file
// of no record is an input error.
func eachNonEmpty(each func(string, io.Reader, func(int, *schemas.CaptureRecord) error) (string, error), name string, in io.Reader, fn func(*schemas.CaptureRecord) error) error {
	n := 0
	_, err := each(name, in, func(_ int, rec *schemas.CaptureRecord) error {
		n++
		return fn(rec)
	})
	if err == nil && n == 0 {
		return &schemas.InputError{File: name, Msg: "no records (the file is empty)"}
	}
	return err
}

// writeCompactCSV writes the compact view as CSV, one row per record.
func writeCompactCSV(out io.Writer, in io.Reader, name string) error {
	w := csv.NewWriter(out)
	w.Write([]string{"id", "trial", "input", "output", "toolCalls", "duration", "steps", "stopReason", "toolErrors", "pass", "score", "excluded"})
	err := eachNonEmpty(EachRecordBrief, name, in, func(rec *schemas.CaptureRecord) error {
		s := Summarize(rec)
		pass, score := "", ""
		if s.Pass != nil {
			pass = strconv.FormatBool(*s.Pass)
		}
		if s.Score != nil {
			score = strconv.FormatFloat(*s.Score, 'g', -1, 64)
		}
		return w.Write([]string{s.ID, strconv.Itoa(max(s.Trial, 1)), s.Input, s.Output, strings.Join(s.ToolCalls, " "),
			strconv.FormatInt(s.Duration, 10), strconv.Itoa(s.Steps), s.StopReason, strconv.FormatBool(s.ToolErrors), pass, score, s.Excluded})
	})
	w.Flush()
	if err == nil {
		err = w.Error()
	}
	return err
}
