package view

import (
	"bytes"
	"errors"
	"fmt"
)

// The indexer never decodes a trajectory: it walks a record line's
// structure to find where each top-level field, each trial of a trials
// record and each step begins and ends, and decodes only the small fields.
// Walking a string is a search for its closing quote (bytes.IndexByte), so
// a megabyte of agent text costs little.

// errSyntax is returned for input that is not well-formed JSON.
var errSyntax = errors.New("malformed JSON")

// structural marks the bytes the walker stops at outside strings.
var structural = func() (t [256]bool) {
	for _, c := range []byte(`"{}[]`) {
		t[c] = true
	}
	return t
}()

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just past the string whose opening quote is
// at b[i].
func skipString(b []byte, i int) (int, error) {
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return 0, errSyntax
		}
		i += j
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for k := i - 1; k >= 0 && b[k] == '\\'; k-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i, nil
		}
	}
}

// skipValue returns the index just past the JSON value starting at or after
// b[i] (leading space skipped).
func skipValue(b []byte, i int) (int, error) {
	i = skipSpace(b, i)
	if i >= len(b) {
		return 0, errSyntax
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			c := b[i]
			if !structural[c] {
				i++
				continue
			}
			switch c {
			case '"':
				var err error
				if i, err = skipString(b, i); err != nil {
					return 0, err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
			i++
		}
		return 0, errSyntax
	}
	// A number, true, false or null: up to the next delimiter.
	start := i
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			if i == start {
				return 0, errSyntax
			}
			return i, nil
		}
		i++
	}
	return i, nil
}

// eachMember calls fn with the key (as written, without its quotes) and the
// value's extent [vs, ve) of each member of the object starting at or after
// b[i], and returns the index just past the object.
func eachMember(b []byte, i int, fn func(key []byte, vs, ve int) error) (int, error) {
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != '{' {
		return 0, fmt.Errorf("%w: want an object", errSyntax)
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, errSyntax
		}
		ke, err := skipString(b, i)
		if err != nil {
			return 0, err
		}
		key := b[i+1 : ke-1]
		i = skipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return 0, errSyntax
		}
		vs := skipSpace(b, i+1)
		ve, err := skipValue(b, vs)
		if err != nil {
			return 0, err
		}
		if err := fn(key, vs, ve); err != nil {
			return 0, err
		}
		i = skipSpace(b, ve)
		if i >= len(b) {
			return 0, errSyntax
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return i + 1, nil
		default:
			return 0, errSyntax
		}
	}
}

// eachElement calls fn with the extent [vs, ve) of each element of the
// array starting at or after b[i], and returns the index just past it.
func eachElement(b []byte, i int, fn func(vs, ve int) error) (int, error) {
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != '[' {
		return 0, fmt.Errorf("%w: want an array", errSyntax)
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		vs := i
		ve, err := skipValue(b, vs)
		if err != nil {
			return 0, err
		}
		if err := fn(vs, ve); err != nil {
			return 0, err
		}
		i = skipSpace(b, ve)
		if i >= len(b) {
			return 0, errSyntax
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return i + 1, nil
		default:
			return 0, errSyntax
		}
	}
}

// countElements counts the elements of the array at b[vs:ve] without
// visiting them beyond finding where each ends.
func countElements(b []byte) (int, error) {
	n := 0
	_, err := eachElement(b, 0, func(int, int) error { n++; return nil })
	return n, err
}
