package view

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"harness/schemas"
)

// A trial's record is read back from disk when the page opens it: its
// fields but the steps come whole; its steps (the "trajectory" and
// "events" arrays, merged in step order as schemas.CaptureRecord does) are
// located once and served a page at a time.

// stepRef is where one step is: a byte range of the file.
type stepRef struct {
	off int64
	n   int32
}

// stepCache keeps the step locations of the trajectories opened last.
type stepCache struct {
	mu    sync.Mutex
	max   int
	order []location
	m     map[location][]stepRef
}

func newStepCache(n int) *stepCache { return &stepCache{max: n, m: map[location][]stepRef{}} }

func (c *stepCache) get(l location) ([]stepRef, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	refs, ok := c.m[l]
	return refs, ok
}

func (c *stepCache) put(l location, refs []stepRef) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[l]; !ok {
		c.order = append(c.order, l)
	}
	c.m[l] = refs
	for len(c.order) > c.max {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
}

// record is a trial's record without its steps, and where its steps are.
type record struct {
	Record *schemas.CaptureRecord
	steps  []stepRef
}

// plainRecord marshals a capture record with its fields as they are (the
// grader result in score, errors included; no format split).
type plainRecord schemas.CaptureRecord

// readRecord reads a trial's record back and checks it is the trial the
// row says.
func readRecord(r *Row, withSteps bool) (*record, error) {
	b, err := r.loc.file.readAt(r.loc)
	if err != nil {
		return nil, err
	}
	var rest bytes.Buffer
	rest.WriteByte('{')
	type seqRef struct {
		seq int
		ref stepRef
	}
	// One pass: the steps of "trajectory" and "events" are located as the
	// record is walked; the other fields are copied to be decoded.
	var lists [][]seqRef
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, fmt.Errorf("view %s: the record of %s trial %d changed on disk (reload): not an object", r.loc.file.rel, r.ID, r.Trial)
	}
	i = skipSpace(b, i+1)
	for err == nil && i < len(b) && b[i] != '}' {
		var ke int
		if b[i] != '"' {
			err = errSyntax
			break
		}
		if ke, err = skipString(b, i); err != nil {
			break
		}
		key := b[i+1 : ke-1]
		i = skipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			err = errSyntax
			break
		}
		vs := skipSpace(b, i+1)
		var ve int
		if (string(key) == "trajectory" || string(key) == "events") && vs < len(b) && b[vs] == '[' {
			var list []seqRef
			ve, err = eachElement(b, vs, func(es, ee int) error {
				seq := 1 << 30
				if withSteps {
					if id := stepIDOf(b[es:ee]); id != "" {
						seq = stepSeq(id)
					}
				}
				list = append(list, seqRef{seq, stepRef{off: r.loc.off + int64(es), n: int32(ee - es)}})
				return nil
			})
			lists = append(lists, list)
		} else {
			ve, err = skipValue(b, vs)
			if err == nil {
				if rest.Len() > 1 {
					rest.WriteByte(',')
				}
				rest.WriteByte('"')
				rest.Write(key)
				rest.WriteString(`":`)
				rest.Write(b[vs:ve])
			}
		}
		if err != nil {
			break
		}
		i = skipSpace(b, ve)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("view %s: the record of %s trial %d changed on disk (reload): %w", r.loc.file.rel, r.ID, r.Trial, err)
	}
	rest.WriteString(`,"trajectory":[]}`)
	var rec schemas.CaptureRecord
	var entry schemas.TrialEntry
	if err := json.Unmarshal(rest.Bytes(), &entry); err == nil && (entry.TrialNum > 0 || entry.GraderResult != nil || entry.Pass != nil) {
		rec = entry.Capture()
	} else if err := json.Unmarshal(rest.Bytes(), &rec); err != nil {
		return nil, fmt.Errorf("view %s: %s trial %d: %w", r.loc.file.rel, r.ID, r.Trial, err)
	}
	if rec.ID != "" && rec.ID != r.ID {
		return nil, fmt.Errorf("view %s: the record at byte %d is case %q, not %q: the file changed on disk (reload)", r.loc.file.rel, r.loc.off, rec.ID, r.ID)
	}
	rec.Trajectory = nil
	out := &record{Record: &rec}
	if !withSteps {
		return out, nil
	}
	// Each list is in step order: merge them (the first list first on
	// ties), as schemas.CaptureRecord's decoder orders them.
	var all []seqRef
	for _, l := range lists {
		if all == nil {
			all = l
			continue
		}
		merged := make([]seqRef, 0, len(all)+len(l))
		x, y := 0, 0
		for x < len(all) || y < len(l) {
			if y >= len(l) || (x < len(all) && all[x].seq <= l[y].seq) {
				merged = append(merged, all[x])
				x++
			} else {
				merged = append(merged, l[y])
				y++
			}
		}
		all = merged
	}
	if len(lists) > 1 && !sort.SliceIsSorted(all, func(i, j int) bool { return all[i].seq < all[j].seq }) {
		// Lists not in order themselves: sort as the decoder does.
		all = nil
		for _, l := range lists {
			all = append(all, l...)
		}
		sort.SliceStable(all, func(i, j int) bool { return all[i].seq < all[j].seq })
	}
	out.steps = make([]stepRef, len(all))
	for i, s := range all {
		out.steps[i] = s.ref
	}
	return out, nil
}

// stepIDOf finds a step's stepId without decoding the step.
func stepIDOf(b []byte) string {
	// harness writes the id right after the type: look there first.
	head := b[:min(len(b), 96)]
	if i := bytes.Index(head, []byte(`"stepId":"`)); i > 0 && (head[i-1] == ',' || head[i-1] == '{') {
		rest := b[i+len(`"stepId":"`):]
		if j := bytes.IndexByte(rest, '"'); j >= 0 && bytes.IndexByte(rest[:j], '\\') < 0 {
			return string(rest[:j])
		}
	}
	id := ""
	stop := fmt.Errorf("stop")
	eachMember(b, 0, func(key []byte, vs, ve int) error {
		if string(key) == "stepId" && b[vs] == '"' {
			json.Unmarshal(b[vs:ve], &id)
			return stop
		}
		return nil
	})
	return id
}

// stepSeq is the sequence number of a step id "<id>-t<trial>-s<n>", as
// schemas orders merged steps.
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

// readSteps reads the steps refs[from:from+limit] back, as raw JSON.
func readSteps(f *file, refs []stepRef) ([]json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var src interface {
		ReadAt([]byte, int64) (int, error)
	}
	if f.compressed {
		if f.spool == nil {
			return nil, fmt.Errorf("view %s: the decompressed copy is gone", f.rel)
		}
		src = f.spool
	} else {
		fh, err := os.Open(f.path)
		if err != nil {
			return nil, fmt.Errorf("view %s: %w", f.rel, err)
		}
		defer fh.Close()
		src = fh
	}
	out := make([]json.RawMessage, 0, len(refs))
	// Steps next to each other are read in one go.
	for i := 0; i < len(refs); {
		j := i + 1
		end := refs[i].off + int64(refs[i].n)
		for j < len(refs) && refs[j].off >= end && refs[j].off-end < 64 && refs[j].off+int64(refs[j].n)-refs[i].off < 8<<20 {
			end = refs[j].off + int64(refs[j].n)
			j++
		}
		buf := make([]byte, end-refs[i].off)
		if _, err := src.ReadAt(buf, refs[i].off); err != nil {
			return nil, fmt.Errorf("view %s: steps at byte %d: %w", f.rel, refs[i].off, err)
		}
		for k := i; k < j; k++ {
			s := refs[k].off - refs[i].off
			out = append(out, json.RawMessage(buf[s:s+int64(refs[k].n)]))
		}
		i = j
	}
	return out, nil
}

// signature is what makes two steps the same for the side-by-side view:
// their kind and content, not their ids or times.
func signature(raw json.RawMessage) string {
	var s schemas.Step
	if json.Unmarshal(raw, &s) != nil {
		return string(raw)
	}
	parts := []string{s.Type, s.Kind, s.Name, s.Method, s.Path, s.Command, strings.Join(s.Args, " "), s.Update}
	switch s.Type {
	case schemas.StepThought, schemas.StepMessage, schemas.StepUserMessage:
		parts = append(parts, oneLine(s.TextContent()))
	case schemas.StepToolCall:
		parts = append(parts, compact(s.Input))
	case schemas.StepPlan:
		parts = append(parts, compact(s.Entries))
	case schemas.StepPermission:
		parts = append(parts, s.OptionID, s.Outcome)
	}
	return strings.Join(parts, "\x00")
}

func compact(b json.RawMessage) string {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return string(b)
	}
	return buf.String()
}
