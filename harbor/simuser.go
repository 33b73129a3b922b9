package harbor

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"harness/schemas"
)

// simUser reads [user], harness's own table (not Harbor's): the task's
// simulated user, as a prompt case's "user" object. A command's ./ or ../
// path and a prompt file are relative to the task directory dir; the
// prompt file is read here. A multi-step task cannot have one: its turns
// are its steps.
func (r *reader) simUser(raw map[string]any, dir string, multiStep bool) *schemas.SimUser {
	v, ok := raw["user"]
	if !ok {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		r.fail("user", "must be a table: [user] with command or model, goal, persona, maxTurns, ...")
		return nil
	}
	if multiStep {
		r.fail("user", "a multi-step task's turns are its steps: it cannot have a simulated user")
		return nil
	}
	b, _ := json.Marshal(m)
	u, err := schemas.ParseSimUser(b)
	if err != nil {
		var ie *schemas.InputError
		if errors.As(err, &ie) {
			r.fail(ie.Field, "%s", ie.Msg)
		} else {
			r.fail("user", "%v", err)
		}
		return nil
	}
	if len(u.Command) > 0 {
		if cmd := u.Command[0]; strings.HasPrefix(cmd, "./") || strings.HasPrefix(cmd, "../") {
			u.Command[0] = filepath.Join(dir, cmd)
		}
	}
	if u.PromptFile != "" {
		path := u.PromptFile
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			r.fail("user.promptFile", "%v", err)
			return nil
		}
		u.Prompt, u.PromptFile = string(b), ""
	}
	return u
}
