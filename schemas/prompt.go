package schemas

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PromptCase is one line of a prompts file: a task to give the agent.
type PromptCase struct {
	// ID names the case; it is unique within a file.
	ID string `json:"id"`
	// Input holds the user turns: one for a plain string, several for a
	// multi-turn conversation run in one session.
	Input Turns `json:"input"`
	// Expected is the expected answer, for graders.
	Expected string `json:"expected,omitempty"`
	// Hint is a grading hint (acp-harness 0.3.3 and later).
	Hint string `json:"hint,omitempty"`
	// Reference is a known-good answer; validate-refs checks that it passes.
	Reference string `json:"reference,omitempty"`
	// NegativeReference is a known-bad answer; validate-refs checks that it fails.
	NegativeReference string `json:"negativeReference,omitempty"`
	// Metadata is free-form; metadata.category is what balance reads.
	Metadata map[string]any `json:"metadata,omitempty"`
	// Timeout overrides the per-turn timeout for this case.
	Timeout Duration `json:"timeout,omitempty"`
	// Workspace overrides the workspace template directory for this case.
	Workspace string `json:"workspace,omitempty"`
	// Image runs this case in a fresh layer over an image (a root
	// filesystem directory or tar, an OCI layout, a local podman image, a
	// build context), as --image does for every case.
	Image string `json:"image,omitempty"`
	// Extra keeps the keys this build does not know, so nothing is dropped.
	Extra map[string]json.RawMessage `json:"-"`
}

var promptKnownKeys = map[string]bool{
	"id": true, "input": true, "expected": true, "hint": true, "reference": true,
	"negativeReference": true, "metadata": true, "timeout": true, "workspace": true, "image": true,
}

// UnmarshalJSON decodes a prompt case and keeps unknown keys in Extra.
func (p *PromptCase) UnmarshalJSON(b []byte) error {
	type plain PromptCase
	var v plain
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	for k, raw := range all {
		if !promptKnownKeys[k] {
			if v.Extra == nil {
				v.Extra = map[string]json.RawMessage{}
			}
			v.Extra[k] = raw
		}
	}
	*p = PromptCase(v)
	return nil
}

// MarshalJSON encodes a prompt case with its unknown keys put back.
func (p PromptCase) MarshalJSON() ([]byte, error) {
	type plain PromptCase
	b, err := json.Marshal(plain(p))
	if err != nil || len(p.Extra) == 0 {
		return b, err
	}
	return mergeExtra(b, p.Extra)
}

// mergeExtra appends the extra keys to an encoded object, skipping keys the
// object already has.
func mergeExtra(obj []byte, extra map[string]json.RawMessage) ([]byte, error) {
	var have map[string]json.RawMessage
	if err := json.Unmarshal(obj, &have); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Write(obj[:len(obj)-1])
	first := len(have) == 0
	for _, k := range sortedKeys(extra) {
		if _, dup := have[k]; dup {
			continue
		}
		if !first {
			buf.WriteByte(',')
		}
		first = false
		kb, _ := json.Marshal(k)
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(extra[k])
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// Turns is the user input of a case: a string (one turn) or an array of
// strings (one turn each, in one session). It encodes back in the form it
// was read in.
type Turns struct {
	// List holds one entry per turn.
	List []string
	// Multi records that the input was an array, even of one element.
	Multi bool
}

// SingleTurn returns a one-turn input written as a plain string.
func SingleTurn(s string) Turns { return Turns{List: []string{s}} }

// UnmarshalJSON accepts a string or an array of strings.
func (t *Turns) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var list []string
		if err := json.Unmarshal(b, &list); err != nil {
			return fmt.Errorf("input must be a string or an array of strings")
		}
		*t = Turns{List: list, Multi: true}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("input must be a string or an array of strings")
	}
	*t = Turns{List: []string{s}}
	return nil
}

// MarshalJSON writes a string for one turn, an array otherwise.
func (t Turns) MarshalJSON() ([]byte, error) {
	if !t.Multi && len(t.List) == 1 {
		return json.Marshal(t.List[0])
	}
	if t.List == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(t.List)
}

// Text joins the turns with newlines, the form graders that expect one
// string receive (as acp-harness does for multi-turn input).
func (t Turns) Text() string { return strings.Join(t.List, "\n") }

// Last returns the last turn, or "" when there is none.
func (t Turns) Last() string {
	if len(t.List) == 0 {
		return ""
	}
	return t.List[len(t.List)-1]
}

// Duration is a time span read from JSON as milliseconds (a number) or a Go
// duration string ("90s"); a bare number in a string also means milliseconds.
type Duration time.Duration

// ParseDuration reads a duration the way every flag and file of harness
// does: Go syntax ("90s", "2m"), or a bare number of milliseconds.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	if ms, err := strconv.ParseFloat(s, 64); err == nil {
		if ms < 0 {
			return 0, fmt.Errorf("duration %q is negative", s)
		}
		return time.Duration(ms * float64(time.Millisecond)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: want Go syntax such as 90s or a number of milliseconds", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	return d, nil
}

// UnmarshalJSON accepts a number of milliseconds or a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	} else {
		s = string(b)
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration as whole milliseconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.FormatInt(time.Duration(d).Milliseconds(), 10)), nil
}

// ContentHash is the hex sha256 of the case as it runs: every key of its
// prompts line (id, input, expected answer, metadata, timeout, workspace,
// image and the keys this build does not know), in a canonical encoding,
// so that the same case read from any file has the same hash and any
// change to it gives another.
func (p PromptCase) ContentHash() string {
	b, err := p.MarshalJSON()
	if err != nil {
		return ""
	}
	// Re-encoded from a generic value: keys sorted, no spaces, numbers
	// as written.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return ""
	}
	canon, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}
