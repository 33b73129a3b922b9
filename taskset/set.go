// Package taskset makes a Harbor task dataset an evaluation's input: it
// loads a task directory or a dataset of them, resolves or builds each
// task's image, writes the prompt cases and the suite that stand for the
// tasks, and validates the tasks' reference solutions with the oracle and
// the no-op agent.
package taskset

import (
	"harness/harbor"
)

// Set is a loaded task directory or dataset.
type Set struct {
	// Dir is the directory as given to Load.
	Dir string
	// Tasks are the tasks: the one task of a task directory, or a
	// dataset's by name.
	Tasks []*harbor.Task
}

// Load reads dir as one Harbor task (it has task.toml) or as a dataset of
// them. Every task's errors are reported together.
func Load(dir string) (*Set, error) {
	tasks, err := harbor.LoadDataset(dir)
	if err != nil {
		return nil, err
	}
	return &Set{Dir: dir, Tasks: tasks}, nil
}

// Task is the task named name, or nil.
func (s *Set) Task(name string) *harbor.Task {
	for _, t := range s.Tasks {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Unhonoured names the task.toml fields the tasks set that are not
// honoured, each with the task that sets it or how many do; "" when there
// are none.
func (s *Set) Unhonoured() string { return harbor.UnhonouredSummary(s.Tasks) }
