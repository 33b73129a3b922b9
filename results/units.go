package results

import (
	"encoding/json"

	"harness/schemas"
)

// UnitKey names one unit of a run: a case and a trial (1 for capture).
type UnitKey struct {
	ID    string
	Trial int
}

// RecordKey reads the unit key and error class of an encoded capture
// record; ok is false for a line that is not one.
func RecordKey(line []byte) (key UnitKey, errClass string, ok bool) {
	key, e, ok := RecordKeyError(line)
	if e != nil {
		errClass = e.Class
	}
	return key, errClass, ok
}

// RecordKeyError reads the unit key and error of an encoded capture
// record (nil for none); ok is false for a line that is not one.
func RecordKeyError(line []byte) (key UnitKey, e *schemas.ErrorInfo, ok bool) {
	var rec struct {
		ID    string             `json:"id"`
		Trial int                `json:"trial"`
		Error *schemas.ErrorInfo `json:"error"`
	}
	if json.Unmarshal(line, &rec) != nil || rec.ID == "" {
		return UnitKey{}, nil, false
	}
	return UnitKey{rec.ID, max(rec.Trial, 1)}, rec.Error, true
}

// Rerun is the resume rule: whether a unit whose record has error e (nil
// for none) runs again. Interrupted units always do (but an ungraded one
// is only graded, see UngradedRecord); with retryErrors, those whose
// failure is not the agent's own (the infrastructure's, the
// configuration's, the grader's, or one without an owner, from an older
// run). The agent's own failures are its results: they are kept.
func Rerun(e *schemas.ErrorInfo, retryErrors bool) bool {
	if e == nil || e.Class == "" {
		return false
	}
	return e.Class == schemas.ErrInterrupted || (retryErrors && e.Owner != schemas.OwnerAgent)
}

// ResumeCapture continues an output of capture records: it returns the
// units it holds, and takes out of the file what will run again (by
// Rerun), a second record of a unit, and a line or compressed frame torn by
// a crash, so that after the run every unit is in it exactly once. An
// ungraded record (its agent's turn complete, its grading cut short by a
// stop) is taken out too, and returned: the run grades it without running
// the agent again, and writes it.
func (o *Output) ResumeCapture(retryErrors bool) (done map[UnitKey]bool, ungraded map[UnitKey]*schemas.CaptureRecord, err error) {
	done = map[UnitKey]bool{}
	ungraded = map[UnitKey]*schemas.CaptureRecord{}
	_, err = o.Resume(func(line []byte) bool {
		key, e, ok := RecordKeyError(line)
		if !ok || done[key] {
			return false
		}
		class := ""
		if e != nil {
			class = e.Class
		}
		if rec := UngradedRecord(line, class); rec != nil {
			if ungraded[key] == nil {
				ungraded[key] = rec
			}
			return false
		}
		if Rerun(e, retryErrors) {
			return false
		}
		done[key] = true
		return true
	})
	for k := range done {
		delete(ungraded, k)
	}
	return done, ungraded, err
}

// UngradedRecord returns the record of an encoded capture record line
// whose error class is errClass (from RecordKey) when it is ungraded
// (schemas.CaptureRecord.Ungraded), else nil.
func UngradedRecord(line []byte, errClass string) *schemas.CaptureRecord {
	if errClass != schemas.ErrInterrupted {
		return nil
	}
	var rec schemas.CaptureRecord
	if json.Unmarshal(line, &rec) != nil || !rec.Ungraded() {
		return nil
	}
	rec.Trial = max(rec.Trial, 1)
	return &rec
}
