// Package rundir is the run directory harness run writes: making it
// (named after the time and the suite), its manifest run.json, its cases
// file, and the listing of the runs under a directory.
package rundir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"harness/results"
	"harness/schemas"
	"harness/trials"
)

// ManifestName is the manifest's file name in a run directory.
const ManifestName = "run.json"

// Manifest is run.json: what a run directory holds and how its run went.
type Manifest struct {
	Suite   Suite   `json:"suite"`
	Harness Harness `json:"harness"`
	// Started and Ended are RFC 3339 times (Ended empty while running).
	Started string `json:"started"`
	Ended   string `json:"ended,omitempty"`
	// Status is running, done, stopped (interrupted or budget) or failed.
	Status string  `json:"status"`
	K      int     `json:"k"`
	Cases  int     `json:"cases"`
	Agents []Agent `json:"agents"`
	// Flags are the flags the run was started with, by long name, each
	// with its values as given (k, the run directory and the output
	// options aside): continuing the run applies them again. Nil in the
	// manifest of a run that did not record them.
	Flags map[string][]string `json:"flags"`
	// Cost sums the agents' costs.
	Cost *schemas.Cost `json:"cost,omitempty"`
	// Compare and Report name the comparison and the HTML page, when made.
	Compare string `json:"compare,omitempty"`
	Report  string `json:"report,omitempty"`
	// JUnit names the JUnit XML of the agents, when made.
	JUnit string `json:"junit,omitempty"`
	// Gates are the suite's comparison gate's verdicts, one per agent but
	// the baseline, when the suite has one and the run finished.
	Gates []trials.RegressionVerdict `json:"gates,omitempty"`
	// Stopped says what stopped the run early and what did not run.
	Stopped string `json:"stopped,omitempty"`
}

// Suite identifies the suite file a run came from.
type Suite struct {
	Name string `json:"name"`
	File string `json:"file"`
	// Path is the file's absolute path, for --resume.
	Path string `json:"path"`
	Hash string `json:"sha256"`
	// Tasks is the absolute path of the Harbor task directory or dataset
	// the suite was made of (harness run DIR), "" for a suite file: a
	// resumed run makes its suite again from it.
	Tasks string `json:"tasks,omitempty"`
}

// Harness identifies the harness build that ran.
type Harness struct {
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Dirty    bool   `json:"dirty,omitempty"`
}

// Agent is one agent's part of a run.
type Agent struct {
	Name    string   `json:"name"`
	Command []string `json:"command"`
	// Output and Summary are file names in the run directory.
	Output  string `json:"output"`
	Summary string `json:"summary"`
	// Status is ok, gate_failed, infra_errors, budget, interrupted, error
	// or pending; Message says why when it is not ok.
	Status   string        `json:"status"`
	Message  string        `json:"message,omitempty"`
	PassRate *float64      `json:"passRate,omitempty"`
	Cost     *schemas.Cost `json:"cost,omitempty"`
}

// Write writes dir's manifest whole (a temporary file renamed into place).
func Write(dir string, m *Manifest) error {
	return results.ReplaceFile(filepath.Join(dir, ManifestName), 0o644, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(m)
	})
}

// Read reads dir's manifest.
func Read(dir string) (*Manifest, error) {
	name := filepath.Join(dir, ManifestName)
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &m, nil
}

// Is reports whether dir is a run directory.
func Is(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, ManifestName))
	return err == nil
}

// Run is a run directory and its manifest.
type Run struct {
	Dir      string
	Manifest *Manifest
}

// List returns the run directories directly under dir, oldest first. A
// directory whose manifest does not read is an error naming it.
func List(dir string) ([]Run, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var runs []Run
	for _, e := range entries {
		sub := filepath.Join(dir, e.Name())
		if !e.IsDir() || !Is(sub) {
			continue
		}
		m, err := Read(sub)
		if err != nil {
			return nil, err
		}
		runs = append(runs, Run{Dir: sub, Manifest: m})
	}
	if len(runs) == 0 {
		return nil, errors.New("no run directories (with run.json) in it")
	}
	sort.SliceStable(runs, func(i, j int) bool { return runs[i].Manifest.Started < runs[j].Manifest.Started })
	return runs, nil
}

// Input is a results file named on a command line: a file as it was
// named, or the output of an agent of a run directory.
type Input struct {
	// File is the results file to read.
	File string
	// Dir and Agent are the run directory and the agent whose output
	// File is; empty for a file named as such.
	Dir, Agent string
}

// Expand resolves what arg names wherever a results file is taken: a
// results file (or "-") as it is; a run directory stands for the outputs
// its agents wrote, in the order of its manifest; DIR:AGENT for the
// output of one agent of a run directory. A directory that is no run
// directory, an agent the run does not have and an agent that wrote no
// records are errors saying so.
func Expand(arg string) ([]Input, error) {
	if arg == "-" {
		return []Input{{File: arg}}, nil
	}
	st, err := os.Stat(arg)
	if err == nil && !st.IsDir() {
		return []Input{{File: arg}}, nil
	}
	if err == nil {
		if !Is(arg) {
			return nil, fmt.Errorf("%s is a directory, not a results file or a run directory (it has no %s)", arg, ManifestName)
		}
		m, err := Read(arg)
		if err != nil {
			return nil, err
		}
		var in []Input
		for _, a := range m.Agents {
			if p := filepath.Join(arg, a.Output); wrote(p) {
				in = append(in, Input{File: p, Dir: arg, Agent: a.Name})
			}
		}
		if len(in) == 0 {
			return nil, fmt.Errorf("%s: no agent of the run wrote records", arg)
		}
		return in, nil
	}
	if i := strings.LastIndexByte(arg, ':'); i > 0 && Is(arg[:i]) {
		dir, name := arg[:i], arg[i+1:]
		m, err := Read(dir)
		if err != nil {
			return nil, err
		}
		var names []string
		for _, a := range m.Agents {
			if a.Name == name {
				p := filepath.Join(dir, a.Output)
				if !wrote(p) {
					return nil, fmt.Errorf("%s: agent %s wrote no records (its status: %s)", arg, name, a.Status)
				}
				return []Input{{File: p, Dir: dir, Agent: name}}, nil
			}
			names = append(names, a.Name)
		}
		return nil, fmt.Errorf("%s: the run in %s has no agent %q (agents: %s)", arg, dir, name, strings.Join(names, ", "))
	}
	// Not there: the reader says so, naming it.
	return []Input{{File: arg}}, nil
}

// ExpandAll is Expand of every argument, in order.
func ExpandAll(args []string) ([]Input, error) {
	var all []Input
	for _, a := range args {
		in, err := Expand(a)
		if err != nil {
			return nil, err
		}
		all = append(all, in...)
	}
	return all, nil
}

// Files are the results files of inputs.
func Files(inputs []Input) []string {
	out := make([]string, len(inputs))
	for i, in := range inputs {
		out[i] = in.File
	}
	return out
}

// wrote reports whether p is a file holding something.
func wrote(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Size() > 0
}
