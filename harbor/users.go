package harbor

import (
	"path/filepath"

	"harness/image"
)

// CheckUsers checks, before anything runs, that the users task.toml's
// user fields name can run commands in img here: a name that is not in
// the image's /etc/passwd (or a group not in its /etc/group), or a user
// other than root without root privileges, is an error naming the file,
// line and field.
func (t *Task) CheckUsers(img *image.Image) error {
	for _, u := range []UserField{t.Config.AgentUser, t.Config.VerifierUser} {
		if u.User == "" {
			continue
		}
		if _, err := img.RunsAs(u.User); err != nil {
			return fieldError(filepath.Join(t.Dir, "task.toml"), u.Line, u.Field, "%v (image %s)", err, img.Ref)
		}
	}
	return nil
}

// agentUser and verifierUser are who a step runs as: its own User, else
// the task's [agent] or [verifier] user.
func (t *Task) agentUser(s Step) string {
	if s.User != "" {
		return s.User
	}
	return t.Config.AgentUser.User
}

func (t *Task) verifierUser(s Step) string {
	if s.User != "" {
		return s.User
	}
	return t.Config.VerifierUser.User
}
