package export

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:embed atif.schema.json
var atifSchemaDoc []byte

// ATIFSchema returns the JSON Schema of ATIF (v1.4 to v1.7) the repository
// carries. The caller must not modify it.
func ATIFSchema() []byte { return atifSchemaDoc }

var compileATIF = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(atifSchemaDoc))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	const url = "mem:///atif.schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
})

// ValidateATIF checks one ATIF document: against the JSON Schema, then the
// rules a schema cannot say: each step_id equals the step's 1-based
// position, each observation result's source_call_id names a tool call of
// the same step, and embedded subagent trajectories have unique ids and are
// valid trajectories themselves. The error lists every problem found.
func ValidateATIF(doc []byte) error {
	sch, err := compileATIF()
	if err != nil {
		return fmt.Errorf("ATIF schema: %w", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if err := sch.Validate(v); err != nil {
		return err
	}
	var t struct {
		Steps []struct {
			StepID    int `json:"step_id"`
			ToolCalls []struct {
				ID string `json:"tool_call_id"`
			} `json:"tool_calls"`
			Observation *struct {
				Results []struct {
					SourceCallID *string `json:"source_call_id"`
				} `json:"results"`
			} `json:"observation"`
		} `json:"steps"`
		Subagents []json.RawMessage `json:"subagent_trajectories"`
	}
	if err := json.Unmarshal(doc, &t); err != nil {
		return err
	}
	var errs []error
	for i, s := range t.Steps {
		if s.StepID != i+1 {
			errs = append(errs, fmt.Errorf("steps[%d]: step_id %d, want %d (ids are the 1-based positions)", i, s.StepID, i+1))
		}
		if s.Observation == nil {
			continue
		}
		calls := map[string]bool{}
		for _, c := range s.ToolCalls {
			calls[c.ID] = true
		}
		for j, r := range s.Observation.Results {
			if r.SourceCallID != nil && !calls[*r.SourceCallID] {
				errs = append(errs, fmt.Errorf("steps[%d].observation.results[%d]: source_call_id %q names no tool call of this step", i, j, *r.SourceCallID))
			}
		}
	}
	ids := map[string]bool{}
	for i, sub := range t.Subagents {
		var id struct {
			TrajectoryID string `json:"trajectory_id"`
		}
		_ = json.Unmarshal(sub, &id)
		if ids[id.TrajectoryID] {
			errs = append(errs, fmt.Errorf("subagent_trajectories[%d]: trajectory_id %q used twice", i, id.TrajectoryID))
		}
		ids[id.TrajectoryID] = true
		if err := ValidateATIF(sub); err != nil {
			errs = append(errs, fmt.Errorf("subagent_trajectories[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}
