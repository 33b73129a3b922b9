package schemas

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"strings"
)

// InputError is bad input: it names the file, the line and the field.
type InputError struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *InputError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": field %q", e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// MaxLineBytes is the longest line the JSONL readers accept.
const MaxLineBytes = 256 << 20

// ReadPrompts reads a whole prompts file (JSONL, one case a line) into
// memory; see ScanPrompts for the checks.
func ReadPrompts(name string, r io.Reader) ([]PromptCase, error) {
	var cases []PromptCase
	err := ScanPrompts(name, r, func(_ int, c PromptCase) error {
		cases = append(cases, c)
		return nil
	})
	return cases, err
}

// ScanPrompts reads a prompts file line by line and calls fn with each good
// case and its line number. Blank lines are skipped but counted, so line
// numbers match an editor's. Every case is checked (valid JSON, an id, an
// input, unique ids) and all problems are returned together, each naming
// the file, line and field; fn is still called for the good cases. Memory
// stays small: only a 64-bit hash and a line number are kept per id.
func ScanPrompts(name string, r io.Reader, fn func(lineNo int, c PromptCase) error) error {
	var (
		errs  []error
		seen  = map[uint64]int{}
		count int
	)
	err := EachLine(r, func(lineNo int, line []byte) error {
		c, err := ParsePrompt(line)
		if err != nil {
			var ie *InputError
			if errors.As(err, &ie) {
				ie.File, ie.Line = name, lineNo
				errs = append(errs, ie)
			} else {
				errs = append(errs, &InputError{File: name, Line: lineNo, Msg: err.Error()})
			}
			return nil
		}
		h := fnv.New64a()
		h.Write([]byte(c.ID))
		key := h.Sum64()
		if first, dup := seen[key]; dup {
			errs = append(errs, &InputError{File: name, Line: lineNo, Field: "id",
				Msg: fmt.Sprintf("duplicate id %q (first on line %d)", c.ID, first)})
			return nil
		}
		seen[key] = lineNo
		count++
		return fn(lineNo, c)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if count == 0 {
		return &InputError{File: name, Msg: "no prompt cases (the file is empty)"}
	}
	return nil
}

// ParsePrompt decodes and checks one prompt case. Errors are *InputError
// with the field filled in (file and line are the caller's to add).
func ParsePrompt(line []byte) (PromptCase, error) {
	var c PromptCase
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(line, &probe); err != nil {
		return c, &InputError{Msg: "not a JSON object: " + jsonErrText(err)}
	}
	if probe == nil {
		return c, &InputError{Msg: "not a JSON object"}
	}
	if raw, ok := probe["user"]; ok {
		if _, err := ParseSimUser(raw); err != nil {
			return c, err
		}
	}
	for _, f := range []string{"id", "input", "expected", "hint", "reference", "negativeReference", "metadata", "timeout", "workspace"} {
		raw, ok := probe[f]
		if !ok {
			continue
		}
		var err error
		switch f {
		case "id", "expected", "hint", "reference", "negativeReference", "workspace":
			var s string
			err = json.Unmarshal(raw, &s)
			if err != nil {
				err = fmt.Errorf("must be a string")
			}
		case "input":
			var t Turns
			if string(bytes.TrimSpace(raw)) == "null" {
				err = fmt.Errorf("must be a string or an array of strings, not null")
			} else {
				err = t.UnmarshalJSON(raw)
			}
		case "metadata":
			var m map[string]any
			if err = json.Unmarshal(raw, &m); err != nil || (m == nil && string(bytes.TrimSpace(raw)) != "null") {
				err = fmt.Errorf("must be an object")
			}
		case "timeout":
			var d Duration
			err = d.UnmarshalJSON(raw)
		}
		if err != nil {
			return c, &InputError{Field: f, Msg: err.Error()}
		}
	}
	if err := json.Unmarshal(line, &c); err != nil {
		return c, &InputError{Msg: jsonErrText(err)}
	}
	if _, ok := probe["id"]; !ok || c.ID == "" {
		return c, &InputError{Field: "id", Msg: "missing (every case needs a non-empty id)"}
	}
	if _, ok := probe["input"]; !ok {
		return c, &InputError{Field: "input", Msg: "missing (every case needs an input)"}
	}
	if len(c.Input.List) == 0 {
		return c, &InputError{Field: "input", Msg: "has no turns"}
	}
	return c, nil
}

func jsonErrText(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, err)
	}
	return err.Error()
}

// EachLine calls fn for each non-blank line of r with its 1-based line
// number. Lines may be up to MaxLineBytes long. A UTF-8 byte order mark at
// the start of the file and a trailing carriage return are dropped. It
// stops at the first error fn returns.
func EachLine(r io.Reader, fn func(lineNo int, line []byte) error) error {
	return EachLineEnd(r, func(lineNo int, line []byte, _ bool) error { return fn(lineNo, line) })
}

// EachLineEnd is EachLine, also telling fn whether the line is the last
// one of r and has no newline at its end: what a writer stopped in the
// middle of a line leaves.
func EachLineEnd(r io.Reader, fn func(lineNo int, line []byte, unterminated bool) error) error {
	br := bufio.NewReaderSize(r, 1<<16)
	if bom, _ := br.Peek(3); bytes.Equal(bom, []byte("\xef\xbb\xbf")) {
		br.Discard(3)
	}
	lineNo := 0
	for {
		line, err := readLine(br)
		if len(line) > 0 || err == nil {
			lineNo++
			trimmed := bytes.TrimSpace(line)
			if len(trimmed) > 0 {
				if ferr := fn(lineNo, trimmed, err == io.EOF); ferr != nil {
					return ferr
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("line %d: %w", lineNo+1, err)
		}
	}
}

// readLine returns the next line without its newline; the slice is only
// valid until the next call.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		buf := append([]byte(nil), line...)
		for err == bufio.ErrBufferFull {
			if len(buf) > MaxLineBytes {
				return nil, fmt.Errorf("line longer than %d bytes", MaxLineBytes)
			}
			line, err = br.ReadSlice('\n')
			buf = append(buf, line...)
		}
		line = buf
	}
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	return line, err
}
