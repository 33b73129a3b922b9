package export

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"harness/results"
	"harness/review"
	"harness/schemas"
)

// Convert turns one capture record into the document of a format.
type Convert func(*schemas.CaptureRecord) (any, error)

// Formats are the names Converter takes.
var Formats = []string{"atif", "openai-messages"}

// Converter returns the conversion to the named format (see Formats), or
// false for an unknown name. An ATIF document is checked against the ATIF
// schema before it is returned; metadata adds each record's id, trial,
// pass and score to an openai-messages document.
func Converter(format string, metadata bool) (Convert, bool) {
	switch format {
	case "atif":
		return func(rec *schemas.CaptureRecord) (any, error) {
			t := ToATIF(rec)
			b, err := json.Marshal(t)
			if err != nil {
				return nil, err
			}
			if err := ValidateATIF(b); err != nil {
				return nil, fmt.Errorf("the ATIF document is not valid: %w", err)
			}
			return t, nil
		}, true
	case "openai-messages":
		return func(rec *schemas.CaptureRecord) (any, error) { return ToMessages(rec, metadata), nil }, true
	}
	return nil, false
}

// Each converts every record of the results file in (named name in
// errors) and passes each document to fn; it names the file, line and
// record of a conversion that fails. A file with no record is a
// *schemas.InputError.
func Each(in io.Reader, name string, convert Convert, fn func(*schemas.CaptureRecord, any) error) error {
	n := 0
	_, err := review.EachRecord(name, in, func(line int, rec *schemas.CaptureRecord) error {
		v, err := convert(rec)
		if err != nil {
			return fmt.Errorf("%s:%d: record %s trial %d: %w", name, line, rec.ID, rec.Trial, err)
		}
		n++
		return fn(rec, v)
	})
	if err == nil && n == 0 {
		err = &schemas.InputError{File: name, Msg: "no records (the file is empty)"}
	}
	return err
}

// WriteJSONL writes every converted record of in as JSON Lines to out
// (outName says by its suffix whether to compress).
func WriteJSONL(out io.Writer, outName string, in io.Reader, name string, convert Convert) error {
	w, err := results.NewWriter(outName, out)
	if err != nil {
		return err
	}
	err = Each(in, name, convert, func(_ *schemas.CaptureRecord, v any) error { return w.Write(v) })
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteDir passes every converted record of in, pretty-printed, to write
// under its own file name: <id>-t<trial>.json, the id made safe for a
// file name (FileSafe), with a -2, -3... suffix for ids that map to the
// same name.
func WriteDir(in io.Reader, name string, convert Convert, write func(file string, doc []byte) error) error {
	used := map[string]bool{}
	return Each(in, name, convert, func(rec *schemas.CaptureRecord, v any) error {
		base := FileSafe(rec.ID) + "-t" + strconv.Itoa(max(rec.Trial, 1))
		file := base + ".json"
		for i := 2; used[file]; i++ {
			file = base + "-" + strconv.Itoa(i) + ".json"
		}
		used[file] = true
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		return write(file, append(b, '\n'))
	})
}

// FileSafe maps an id to a file name: letters, digits, '-', '_' and '.'
// kept, anything else '_', at most 80 bytes, never empty or a dot name.
func FileSafe(id string) string {
	b := []byte(id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) > 80 {
		b = b[:80]
	}
	s := string(b)
	if s == "" || s == "." || s == ".." {
		s = "_" + s
	}
	return s
}
