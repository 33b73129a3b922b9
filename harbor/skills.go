package harbor

import (
	"context"
	"fmt"
	"time"

	"harness/image"
)

// skillsTimeout bounds the copy of a task's skills.
const skillsTimeout = 2 * time.Minute

// InstallSkills copies the task's skills_dir (a directory in the image;
// relative to the working directory) into dir, the agent's own skills
// directory relative to its HOME (".claude/skills"), in the layer before
// the agent starts: as the agent's user, with the agent's HOME, so the
// copies are the agent's. A skills_dir the image lacks is an error naming
// the field.
func InstallSkills(ctx context.Context, l *image.Layer, t *Task, dir string, s Step) error {
	if t.Config.SkillsDir == "" || dir == "" {
		return nil
	}
	s.User = t.agentUser(s)
	script := `if [ ! -d "$1" ]; then echo "no such directory in the image" >&2; exit 1; fi; mkdir -p "$HOME/$2" && cp -R "$1/." "$HOME/$2/"`
	argv := []string{"sh", "-c", script, "sh", t.Config.SkillsDir, dir}
	ran, err := run(ctx, l, argv, t.Workdir(l.Image), env(l.Image, t.AgentEnv(), s.Env), skillsTimeout, s)
	if err == nil && (ran.TimedOut || ran.ExitCode != 0) {
		err = fmt.Errorf("%s", lastLines(ran.Output, 3))
		if ran.TimedOut {
			err = fmt.Errorf("did not finish within %s", skillsTimeout)
		}
	}
	if err != nil {
		return fmt.Errorf("task.toml:%d environment.skills_dir %s: copy to ~/%s: %w", t.Config.SkillsLine, t.Config.SkillsDir, dir, err)
	}
	return nil
}
