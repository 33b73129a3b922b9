package evaluation

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"harness/schemas"
	"harness/simuser"
)

// Survey is what the cases of a prompts file ask for, read before any
// agent starts.
type Survey struct {
	// Cases counts the cases.
	Cases int
	// Images are the images cases name, each once, in the order of the
	// file; CasesWithImage counts the cases that name one.
	Images         []string
	CasesWithImage int
	// Workspaces are the workspaces cases name, resolved against the
	// file's directory, in the order of the file.
	Workspaces []string
}

// AnyCaseWorkspace says some case names a workspace of its own.
func (s *Survey) AnyCaseWorkspace() bool { return len(s.Workspaces) > 0 }

// Survey reads the prompts file through once, checking every case: a
// case's workspace must be a directory, a simulated user's prompt file
// readable, a model user's API key set in the environment getenv reads
// (unless it names a base URL). Every problem found is returned,
// each naming the file, the line and the field.
func (p Prompts) Survey(getenv func(string) string) (*Survey, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	s := &Survey{}
	var caseErrs []error
	err := p.Scan(func(lineNo int, c *schemas.PromptCase) error {
		s.Cases++
		if c.Image != "" {
			s.CasesWithImage++
			if !slices.Contains(s.Images, c.Image) {
				s.Images = append(s.Images, c.Image)
			}
		}
		if c.Workspace != "" {
			s.Workspaces = append(s.Workspaces, c.Workspace)
			if st, err := os.Stat(c.Workspace); err != nil || !st.IsDir() {
				caseErrs = append(caseErrs, &schemas.InputError{File: p.Name, Line: lineNo, Field: "workspace",
					Msg: fmt.Sprintf("%s is not a directory", c.Workspace)})
			}
		}
		if c.User != nil && c.User.PromptFile != "" {
			// Scan could not read it.
			_, err := os.ReadFile(c.User.PromptFile)
			caseErrs = append(caseErrs, &schemas.InputError{File: p.Name, Line: lineNo, Field: "user.promptFile",
				Msg: fmt.Sprint(err)})
		}
		var mk *simuser.MissingKeyError
		if errors.As(simuser.CheckKey(c.User, getenv), &mk) {
			caseErrs = append(caseErrs, &schemas.InputError{File: p.Name, Line: lineNo, Field: "user." + mk.Field(),
				Msg: mk.Problem()})
		}
		return nil
	})
	if err == nil {
		err = errors.Join(caseErrs...)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}
