package capture

import (
	"encoding/json"
	"fmt"
	"sort"
	"unicode/utf8"

	"harness/schemas"
)

// cutMarker ends a value that was cut to keep a record under its limit.
const cutMarker = "…[harness: %d bytes cut: the record was over its size limit]"

// capField is one value of a record that may be cut: a string, or raw
// JSON (which, when cut, becomes a string holding its start).
type capField struct {
	name string
	str  *string
	raw  *json.RawMessage
}

func (f capField) size() int {
	if f.str != nil {
		return len(*f.str)
	}
	return len(*f.raw)
}

// capRecord cuts the largest values of rec (message and tool contents,
// tool input and output, terminal output, diffs, output) until the encoded
// record fits in max bytes, marking each cut value and noting the cut on
// the record. It reports whether anything was cut. max <= 0 means no limit.
func capRecord(rec *schemas.CaptureRecord, max int64) bool {
	if max <= 0 {
		return false
	}
	fields := capFields(rec)
	// The values that may be cut are nearly all of a big record: when
	// they are far under the limit, so is the record, and encoding it to
	// find out would cost every case.
	total := 0
	for _, f := range fields {
		total += f.size()
	}
	if int64(total)+int64(len(rec.Trajectory))*512+(64<<10) < max {
		return false
	}
	b, err := json.Marshal(rec)
	if err != nil || int64(len(b)) <= max {
		return false
	}
	over := int64(len(b)) - max
	sort.SliceStable(fields, func(i, j int) bool { return fields[i].size() > fields[j].size() })
	note := &schemas.Truncation{Limit: max, Size: int64(len(b))}
	for _, f := range fields {
		if over <= 0 {
			break
		}
		n := f.size()
		if n < 256 {
			break
		}
		// Cut what is over, and a little more for the marker and for
		// the escaping a cut raw value gains as a string.
		keep := max64(int64(n)-over-256, 128)
		if f.raw != nil {
			keep /= 2
		}
		cut := cutString(f, int(keep))
		over -= int64(n - cut)
		note.Fields = append(note.Fields, f.name)
	}
	if b, err := json.Marshal(rec); err == nil {
		note.Cut = note.Size - int64(len(b))
	}
	rec.Truncated = note
	return true
}

// cutString shortens f to about keep bytes (on a rune boundary) plus the
// marker, and returns its new size.
func cutString(f capField, keep int) int {
	var s string
	if f.str != nil {
		s = *f.str
	} else {
		s = string(*f.raw)
	}
	if keep > len(s) {
		keep = len(s)
	}
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	out := s[:keep] + fmt.Sprintf(cutMarker, len(s)-keep)
	if f.str != nil {
		*f.str = out
		return len(out)
	}
	b, _ := json.Marshal(out)
	*f.raw = b
	return len(b)
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// capFields lists the values of rec that may be cut.
func capFields(rec *schemas.CaptureRecord) []capField {
	fields := []capField{{name: "output", str: &rec.Output}}
	for i := range rec.Trajectory {
		s := &rec.Trajectory[i]
		for _, r := range []struct {
			name string
			raw  *json.RawMessage
		}{{"content", &s.Content}, {"input", &s.Input}, {"output", &s.Output}, {"raw", &s.Raw}, {"toolCall", &s.ToolCall}} {
			if len(*r.raw) > 0 {
				fields = append(fields, capField{name: fmt.Sprintf("trajectory[%d].%s", i, r.name), raw: r.raw})
			}
		}
		if s.Text != "" {
			fields = append(fields, capField{name: fmt.Sprintf("trajectory[%d].text", i), str: &s.Text})
		}
	}
	if rec.Workspace != nil {
		for i := range rec.Workspace.FileChanges {
			if rec.Workspace.FileChanges[i].Diff != "" {
				fields = append(fields, capField{name: fmt.Sprintf("workspace.fileChanges[%d].diff", i), str: &rec.Workspace.FileChanges[i].Diff})
			}
		}
		for i := range rec.Workspace.GitChanges {
			if rec.Workspace.GitChanges[i].Diff != "" {
				fields = append(fields, capField{name: fmt.Sprintf("workspace.gitChanges[%d].diff", i), str: &rec.Workspace.GitChanges[i].Diff})
			}
		}
	}
	return fields
}
