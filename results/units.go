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
	var rec struct {
		ID    string             `json:"id"`
		Trial int                `json:"trial"`
		Error *schemas.ErrorInfo `json:"error"`
	}
	if json.Unmarshal(line, &rec) != nil || rec.ID == "" {
		return UnitKey{}, "", false
	}
	if rec.Error != nil {
		errClass = rec.Error.Class
	}
	return UnitKey{rec.ID, max(rec.Trial, 1)}, errClass, true
}

// Rerun is the resume rule: whether a unit whose record has error class
// errClass ("" for none) runs again. Interrupted units always do (but an
// ungraded one is only graded, see UngradedRecord); errored ones with
// retryErrors.
func Rerun(errClass string, retryErrors bool) bool {
	return errClass == schemas.ErrInterrupted || (errClass != "" && retryErrors)
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
		key, class, ok := RecordKey(line)
		if !ok || done[key] {
			return false
		}
		if rec := UngradedRecord(line, class); rec != nil {
			if ungraded[key] == nil {
				ungraded[key] = rec
			}
			return false
		}
		if Rerun(class, retryErrors) {
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
