// Package suiterun turns a parsed suite into what a run of it needs: the
// cases (the prompts file's and the inline ones, with their asserts), the
// graders built from the suite-wide graders and each case's asserts, the
// budget shared by its agents, the options of each agent's trials, and the
// files a Slurm task reads the graders and prices from. Package suite only
// reads the file; this package decides what running it means.
package suiterun

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"harness/cost"
	"harness/graders"
	"harness/results"
	"harness/schemas"
	"harness/simuser"
	"harness/suite"
)

// Cases are the cases a suite runs, with each case's own graders.
type Cases struct {
	// List holds the prompts file's cases, then the inline ones.
	List []schemas.PromptCase
	// Asserts holds each case's own graders by case id, as JSON values:
	// the suite's per-case asserts and those of prompts lines carrying an
	// "assert" key.
	Asserts map[string]any
	// AssertLines holds the line of the prompts file each assert of a
	// prompts line is on, by case id.
	AssertLines map[string]int
	// Lines holds the line of each case of the prompts file, by case id.
	Lines map[string]int
}

// ReadCases gathers the cases of s: the prompts file's (an "assert" key
// of a line is taken out of the case into Asserts), then the inline ones.
// A case id given twice, or no case at all, is an error naming the file.
func ReadCases(s *suite.Suite) (*Cases, error) {
	cs := &Cases{Asserts: maps.Clone(s.Asserts), AssertLines: map[string]int{}, Lines: map[string]int{}}
	if cs.Asserts == nil {
		cs.Asserts = map[string]any{}
	}
	if s.PromptsFile != "" {
		if err := cs.readPrompts(s); err != nil {
			return nil, err
		}
	}
	seen := map[string]bool{}
	for _, c := range cs.List {
		seen[c.ID] = true
	}
	for _, c := range s.Cases {
		if seen[c.ID] {
			field := s.CaseFields[c.ID]
			return nil, &schemas.InputError{File: s.File, Line: s.Line(field), Field: field + ".id", Msg: fmt.Sprintf("case %q is in %s too", c.ID, s.PromptsFile)}
		}
		cs.List = append(cs.List, c)
	}
	if len(cs.List) == 0 {
		return nil, fmt.Errorf("%s: no cases to run", s.File)
	}
	return cs, nil
}

// readPrompts reads the cases of the prompts file s names.
func (cs *Cases) readPrompts(s *suite.Suite) error {
	r, err := results.Open(s.PromptsFile, nil)
	if err != nil {
		return fmt.Errorf("%s: prompts: %w", s.File, err)
	}
	defer r.Close()
	return schemas.ScanPrompts(s.PromptsFile, r, func(line int, c schemas.PromptCase) error {
		if raw, ok := c.Extra["assert"]; ok {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				return &schemas.InputError{File: s.PromptsFile, Line: line, Field: "assert", Msg: err.Error()}
			}
			cs.Asserts[c.ID] = v
			cs.AssertLines[c.ID] = line
			delete(c.Extra, "assert")
		}
		cs.Lines[c.ID] = line
		cs.List = append(cs.List, c)
		return nil
	})
}

// MissingUserKeys names each case of s whose model user has no API key
// in the environment getenv reads (and no base URL): the prompts file's
// line of the case, or the suite's of an inline one, and the user's
// field.
func (cs *Cases) MissingUserKeys(s *suite.Suite, getenv func(string) string) error {
	var errs []error
	for i := range cs.List {
		c := &cs.List[i]
		var mk *simuser.MissingKeyError
		if !errors.As(simuser.CheckKey(c.User, getenv), &mk) {
			continue
		}
		if line, ok := cs.Lines[c.ID]; ok {
			errs = append(errs, &schemas.InputError{File: s.PromptsFile, Line: line, Field: "user." + mk.Field(), Msg: mk.Problem()})
			continue
		}
		field := s.CaseFields[c.ID] + ".user." + mk.Field()
		errs = append(errs, &schemas.InputError{File: s.File, Line: s.Line(field), Field: field, Msg: mk.Problem()})
	}
	return errors.Join(errs...)
}

// GraderConfig is the grader config of a suite: a per-case config (type
// "cases") holding, for each case, the suite-wide graders and the case's
// asserts; nil when the suite grades nothing.
func GraderConfig(s *suite.Suite, asserts map[string]any) map[string]any {
	if len(s.Graders) == 0 && len(asserts) == 0 {
		return nil
	}
	var common []any
	for _, g := range s.Graders {
		if p, ok := g.(string); ok {
			common = append(common, map[string]any{"type": "file", "path": p})
		} else {
			common = append(common, g)
		}
	}
	cases := map[string]any{}
	for id, a := range asserts {
		list, ok := a.([]any)
		if !ok {
			list = []any{a}
		}
		cases[id] = append(slices.Clone(common), list...)
	}
	cfg := map[string]any{"type": "cases", "cases": cases, "dir": s.Dir}
	if len(common) > 0 {
		cfg["default"] = common
	}
	if s.Judge != nil {
		cfg["judge"] = s.Judge
	}
	return cfg
}

// Graders builds the suite's graders with the options of each trials run
// (nil when the suite grades nothing). An error in a grader's config
// names where the user wrote it: see GraderError.
func Graders(s *suite.Suite, cs *Cases) func(graders.Options) ([]graders.Grader, error) {
	cfg := GraderConfig(s, cs.Asserts)
	if cfg == nil {
		return nil
	}
	return func(opts graders.Options) ([]graders.Grader, error) {
		g, err := graders.FromConfig(cfg, s.File, s.Dir, opts)
		if err != nil {
			return nil, GraderError(s, cs, err)
		}
		return []graders.Grader{g}, nil
	}
}

// GraderError says where a grader of the suite is wrong: the file (the
// suite, or the prompts file for an assert on a prompts line), the line
// and the field. The config GraderConfig builds gives each case the
// suite-wide graders first, then its own asserts; the error's field is
// mapped back to where the user wrote it. Errors other than a
// *graders.ConfigError are returned as they are.
func GraderError(s *suite.Suite, cs *Cases, err error) error {
	var ce *graders.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	field := ce.Field
	if rest, ok := strings.CutPrefix(field, "default"); ok {
		field = "graders" + rest
	}
	if rest, ok := strings.CutPrefix(field, "cases."); ok {
		id, sub, hasIndex := strings.Cut(rest, "[")
		assertField, line := "", 0
		switch caseField, inline := s.CaseFields[id]; {
		case inline:
			assertField = caseField + ".assert"
		case cs.AssertLines[id] > 0:
			assertField, line = "assert", cs.AssertLines[id]
		}
		if assertField != "" {
			field = assertField
			if hasIndex {
				field = assertIndexField(len(s.Graders), cs.Asserts[id], assertField, sub)
			}
			if line > 0 {
				return &schemas.InputError{File: s.PromptsFile, Line: line, Field: field, Msg: ce.Msg}
			}
		}
	}
	return &schemas.InputError{File: s.File, Line: s.Line(field), Field: field, Msg: ce.Msg}
}

// assertIndexField maps "J]REST", the index J of a case's grader list in
// the suite's config and what follows, to the field the user wrote: one
// of the suite-wide graders (graders[J]REST), or the case's assert
// (assertField[J-n]REST, n being the number of suite-wide graders; without
// the index when the assert is a single grader, not a list).
func assertIndexField(n int, assert any, assertField, sub string) string {
	idx, rest, _ := strings.Cut(sub, "]")
	j, err := strconv.Atoi(idx)
	if err != nil {
		return assertField + "[" + sub
	}
	if j < n {
		return fmt.Sprintf("graders[%d]%s", j, rest)
	}
	if _, isList := assert.([]any); !isList {
		return assertField + rest
	}
	return fmt.Sprintf("%s[%d]%s", assertField, j-n, rest)
}

// TaskFiles are the files WriteForTasks wrote, as absolute paths ("" when
// not written).
type TaskFiles struct {
	// Graders holds the suite's grader config (GraderConfig).
	Graders string
	// Prices holds the price table.
	Prices string
}

// Names of the files WriteForTasks writes in the run directory.
const (
	GradersName = "graders.json"
	PricesName  = "prices.json"
)

// WriteForTasks writes the suite's graders and prices as files in the run
// directory dir, for tasks that run elsewhere (on Slurm) and read them
// from there.
func WriteForTasks(dir string, s *suite.Suite, asserts map[string]any, prices cost.Table) (TaskFiles, error) {
	var tf TaskFiles
	write := func(name string, v any) (string, error) {
		p, err := filepath.Abs(filepath.Join(dir, name))
		if err != nil {
			return "", err
		}
		return p, results.ReplaceFile(p, 0o644, func(w io.Writer) error {
			enc := json.NewEncoder(w)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			return enc.Encode(v)
		})
	}
	var err error
	if cfg := GraderConfig(s, asserts); cfg != nil {
		if tf.Graders, err = write(GradersName, cfg); err != nil {
			return TaskFiles{}, err
		}
	}
	if len(prices) > 0 {
		if tf.Prices, err = write(PricesName, prices); err != nil {
			return TaskFiles{}, err
		}
	}
	return tf, nil
}
