package evaluation

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"harness/schemas"
)

// ChangedCasesError is the error of resuming an output that holds records
// of cases that read otherwise when those records were written: resuming
// would mix two versions of a case in one output (and a comparison would
// count the change as the agent's).
type ChangedCasesError struct {
	// File is the output (or partial file) that holds the records.
	File string
	// IDs are the changed cases, in the order their records were found.
	IDs []string
}

func (e *ChangedCasesError) Error() string {
	quoted := make([]string, len(e.IDs))
	for i, id := range e.IDs {
		quoted[i] = fmt.Sprintf("%q", id)
	}
	what, verb := "case "+quoted[0], "its records were"
	if len(quoted) > 1 {
		what, verb = "cases "+strings.Join(quoted, ", "), "their records were"
	}
	return fmt.Sprintf("%s: %s changed since %s written (the content hash of the prompts line differs): resuming would mix two versions of a case in one output; write a new output, or run the changed cases again",
		e.File, what, verb)
}

// caseVersions checks the records an earlier run wrote against the cases
// as they read now, by content hash.
type caseVersions struct {
	now map[string]string // case id -> content hash
	// rerun drops the records of changed cases (their units run again)
	// instead of refusing them.
	rerun   bool
	changed []string
}

// newCaseVersions reads the content hash of every case of p.
func newCaseVersions(p Prompts, rerun bool) (*caseVersions, error) {
	v := &caseVersions{now: map[string]string{}, rerun: rerun}
	err := p.Scan(func(_ int, c *schemas.PromptCase) error {
		v.now[c.ID] = c.ContentHash()
		return nil
	})
	return v, err
}

// stale says whether a record of case id, written for the case with
// content hash hash, was written for another version of it. A record
// with no hash (an older run's) or of a case no longer in the prompts is
// never stale.
func (v *caseVersions) stale(id, hash string) bool {
	if v == nil || hash == "" {
		return false
	}
	now, ok := v.now[id]
	return ok && now != hash
}

// note records that case id changed.
func (v *caseVersions) note(id string) {
	if !slices.Contains(v.changed, id) {
		v.changed = append(v.changed, id)
	}
}

// err is the error of the changed cases found in file (nil when there are
// none, or they run again).
func (v *caseVersions) err(file string) error {
	if v == nil || v.rerun || len(v.changed) == 0 {
		return nil
	}
	return &ChangedCasesError{File: file, IDs: slices.Clone(v.changed)}
}

// lineCaseHash reads the case hash of an encoded record ("" when it has
// none).
func lineCaseHash(line []byte) string {
	var probe struct {
		CaseHash string `json:"caseHash"`
	}
	json.Unmarshal(line, &probe)
	return probe.CaseHash
}
