package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"harness/schemas"
)

// MaxProblems bounds the problems a Problems lists (it still counts all).
const MaxProblems = 20

// Problems collects input problems to report in one error.
type Problems struct {
	List []string
	N    int
}

// Addf adds one problem.
func (p *Problems) Addf(format string, args ...any) {
	p.N++
	if len(p.List) < MaxProblems {
		p.List = append(p.List, fmt.Sprintf(format, args...))
	}
}

// Err lists the problems in one error headed "N what:", or returns nil.
func (p *Problems) Err(what string) error {
	if p.N == 0 {
		return nil
	}
	msg := fmt.Sprintf("%d %s:\n  %s", p.N, what, strings.Join(p.List, "\n  "))
	if p.N > len(p.List) {
		msg += fmt.Sprintf("\n  ... and %d more", p.N-len(p.List))
	}
	return errors.New(msg)
}

// unitLoc is where a unit's record is: its file and line, and its place in
// the spool.
type unitLoc struct {
	file  int
	line  int
	off   int64
	size  int
	class string // the record's error class, "" for none
}

// Merger joins the result files of a sharded run: every unit must be there
// once. Records are copied to a spool file (uncompressed, so each can be
// read back by offset while memory stays flat in the number of records).
type Merger struct {
	files []string
	units map[UnitKey]*unitLoc
	order []string // case ids in order of first appearance
	seen  map[string]bool
	spool *os.File
	size  int64
	maxT  int
	// Skipped is told of each line that is not JSON (a record cut short
	// by a crash).
	Skipped func(file string, line int)
	// Bad collects the problems found while reading.
	Bad Problems
	// Key, when set, makes every line of a shard one harness must have
	// signed: any other goes to Foreign, naming the file and line, and is
	// never a record. Lines are spooled without their integrity field.
	Key *Key
	// Foreign collects the lines harness did not write.
	Foreign Problems
}

// NewMerger starts a merge of the given files (named for messages).
func NewMerger(files []string) (*Merger, error) {
	spool, err := os.CreateTemp("", "harness-merge-*.jsonl")
	if err != nil {
		return nil, fmt.Errorf("merge: spool: %w", err)
	}
	return &Merger{files: files, units: map[UnitKey]*unitLoc{}, seen: map[string]bool{}, spool: spool}, nil
}

// Close removes the spool.
func (m *Merger) Close() error {
	m.spool.Close()
	return os.Remove(m.spool.Name())
}

// Records is the number of units found.
func (m *Merger) Records() int { return len(m.units) }

// Order is the case ids in the order they first appeared.
func (m *Merger) Order() []string { return m.order }

// MaxTrial is the largest trial number seen.
func (m *Merger) MaxTrial() int { return m.maxT }

// Read takes the records of file number i (capture records, or trials
// records whose trials count as the capture records they hold; summary
// lines are skipped) and returns how many it added. Problems with single
// records go to m.Bad; an error stops the merge.
func (m *Merger) Read(i int, r io.Reader) (int, error) {
	name := m.files[i]
	records := 0
	err := schemas.EachLine(r, func(lineNo int, line []byte) error {
		n, err := m.addLine(i, name, lineNo, line)
		records += n
		return err
	})
	if err != nil {
		var ie *schemas.InputError
		if errors.As(err, &ie) {
			return records, err
		}
		return records, fmt.Errorf("shard %s: %w", name, err)
	}
	return records, nil
}

func (m *Merger) addLine(fileIdx int, name string, lineNo int, line []byte) (int, error) {
	if m.Key != nil && json.Valid(line) {
		body, _, err := m.Key.Verify(name, lineNo, line)
		if err != nil {
			m.Foreign.Addf("%v", err)
			return 0, nil
		}
		line = body
	} else if body, _, signed := schemas.SplitIntegrity(line); signed {
		line = body
	}
	rl, err := schemas.ParseResultLine(line)
	if err == nil && rl.Kind == schemas.KindSummary {
		return 0, nil
	}
	if err == nil && rl.Kind == schemas.KindTrials {
		n := 0
		for i := range rl.Trials.Trials {
			rec := rl.Trials.Trials[i].Capture()
			rec.ID = rl.Trials.ID
			b, err := Marshal(rec)
			if err != nil {
				return n, err
			}
			added, err := m.addCapture(fileIdx, name, lineNo, b)
			n += added
			if err != nil {
				return n, err
			}
		}
		return n, nil
	}
	return m.addCapture(fileIdx, name, lineNo, line)
}

// addCapture takes one capture record line.
func (m *Merger) addCapture(fileIdx int, name string, lineNo int, line []byte) (int, error) {
	var probe struct {
		ID    *string         `json:"id"`
		Trial json.RawMessage `json:"trial"`
		Error *struct {
			Class string `json:"class"`
		} `json:"error"`
	}
	if err := json.Unmarshal(line, &probe); err != nil {
		// A crash can cut a record short; a shard continued later reran
		// it, and a unit still missing is reported.
		if m.Skipped != nil {
			m.Skipped(name, lineNo)
		}
		return 0, nil
	}
	if probe.ID == nil || *probe.ID == "" {
		m.Bad.Addf("%s:%d: field \"id\": missing or empty", name, lineNo)
		return 0, nil
	}
	trial := 1
	if len(probe.Trial) > 0 && string(probe.Trial) != "null" {
		if err := json.Unmarshal(probe.Trial, &trial); err != nil || trial < 0 {
			m.Bad.Addf("%s:%d: field \"trial\": want a positive integer, got %s", name, lineNo, probe.Trial)
			return 0, nil
		}
		trial = max(trial, 1)
	}
	loc := &unitLoc{file: fileIdx, line: lineNo, off: m.size, size: len(line)}
	if probe.Error != nil {
		loc.class = probe.Error.Class
		if loc.class == "" {
			loc.class = schemas.ErrUnclassified
		}
	}
	key := UnitKey{*probe.ID, trial}
	if prev := m.units[key]; prev != nil {
		switch {
		case prev.file != fileIdx:
			m.Bad.Addf("case %q trial %d is in two shards: %s:%d and %s:%d", key.ID, key.Trial, m.files[prev.file], prev.line, name, lineNo)
			return 0, nil
		case prev.class == "":
			m.Bad.Addf("case %q trial %d is twice in %s: lines %d and %d", key.ID, key.Trial, name, prev.line, lineNo)
			return 0, nil
		}
		// An errored record rerun later in the same file (a resumed
		// shard): the later one counts.
	}
	if _, err := m.spool.Write(append(line, '\n')); err != nil {
		return 0, fmt.Errorf("merge: spool: %w", err)
	}
	m.size += int64(len(line) + 1)
	m.units[key] = loc
	m.maxT = max(m.maxT, trial)
	if !m.seen[key.ID] {
		m.seen[key.ID] = true
		m.order = append(m.order, key.ID)
	}
	return 1, nil
}

// Where says where the first record of case id is ("FILE:LINE").
func (m *Merger) Where(id string) string {
	var best *unitLoc
	for key, loc := range m.units {
		if key.ID == id && (best == nil || loc.file < best.file || loc.file == best.file && loc.line < best.line) {
			best = loc
		}
	}
	if best == nil {
		return ""
	}
	return fmt.Sprintf("%s:%d", m.files[best.file], best.line)
}

// Beyond lists ("FILE:LINE: case "X" trial T") the records whose trial is
// beyond k, in case and trial order.
func (m *Merger) Beyond(k int) []string {
	var out []string
	for _, key := range m.sortedKeys() {
		if loc := m.units[key]; key.Trial > k {
			out = append(out, fmt.Sprintf("%s:%d: case %q trial %d", m.files[loc.file], loc.line, key.ID, key.Trial))
		}
	}
	return out
}

// Gap is a unit with no usable record.
type Gap struct {
	UnitKey
	// Interrupted is set when the only record is an interrupted one, at
	// Where.
	Interrupted bool
	Where       string
}

// Gaps lists the units of cases ids × trials 1..k that have no record, or
// only an interrupted one.
func (m *Merger) Gaps(ids []string, k int) []Gap {
	var gaps []Gap
	for _, id := range ids {
		for t := 1; t <= k; t++ {
			loc := m.units[UnitKey{id, t}]
			switch {
			case loc == nil:
				gaps = append(gaps, Gap{UnitKey: UnitKey{id, t}})
			case loc.class == schemas.ErrInterrupted:
				gaps = append(gaps, Gap{UnitKey: UnitKey{id, t}, Interrupted: true, Where: fmt.Sprintf("%s:%d", m.files[loc.file], loc.line)})
			}
		}
	}
	return gaps
}

func (m *Merger) sortedKeys() []UnitKey {
	keys := make([]UnitKey, 0, len(m.units))
	for k := range m.units {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].ID != keys[j].ID {
			return keys[i].ID < keys[j].ID
		}
		return keys[i].Trial < keys[j].Trial
	})
	return keys
}

// record reads a unit's line back from the spool.
func (m *Merger) record(loc *unitLoc) ([]byte, error) {
	b := make([]byte, loc.size)
	if _, err := m.spool.ReadAt(b, loc.off); err != nil {
		return nil, fmt.Errorf("merge: spool: %w", err)
	}
	return b, nil
}

// WriteCaptures writes the records as they are, in case (ids) and trial
// order.
func (m *Merger) WriteCaptures(w *Writer, ids []string, k int) error {
	for _, id := range ids {
		for t := 1; t <= k; t++ {
			loc := m.units[UnitKey{id, t}]
			if loc == nil {
				continue
			}
			b, err := m.record(loc)
			if err != nil {
				return err
			}
			if err := w.WriteRaw(b); err != nil {
				return fmt.Errorf("merge: output: %w", err)
			}
		}
	}
	return nil
}

// Trials returns the finished records of case id, trials 1..k (interrupted
// ones left out).
func (m *Merger) Trials(id string, k int) ([]schemas.CaptureRecord, error) {
	var recs []schemas.CaptureRecord
	for t := 1; t <= k; t++ {
		loc := m.units[UnitKey{id, t}]
		if loc == nil || loc.class == schemas.ErrInterrupted {
			continue
		}
		b, err := m.record(loc)
		if err != nil {
			return nil, err
		}
		var rec schemas.CaptureRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, &schemas.InputError{File: m.files[loc.file], Line: loc.line, Msg: "not a capture record: " + err.Error()}
		}
		recs = append(recs, rec)
	}
	return recs, nil
}
