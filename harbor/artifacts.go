package harbor

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"harness/image"
)

// Artifact is one entry of task.toml's artifacts: a path inside the
// trial's environment copied out after the trial, to Destination (a
// relative path under the trial's artifacts directory; the source's base
// name when not given).
type Artifact struct {
	Source, Destination string
}

// artifacts reads the top-level artifacts: a list of paths, or of tables
// {source, destination}.
func (r *reader) artifacts(raw map[string]any) []Artifact {
	v, ok := raw["artifacts"]
	if !ok {
		return nil
	}
	list, isList := v.([]any)
	if maps, ok := v.([]map[string]any); ok {
		isList = true
		for _, m := range maps {
			list = append(list, m)
		}
	}
	if !isList {
		r.fail("artifacts", "must be a list of paths or of tables {source, destination}")
		return nil
	}
	line := lineOf(r.lines, "artifacts")
	fail := func(f, format string, args ...any) {
		if r.err == nil {
			r.err = fieldError(r.file, line, f, format, args...)
		}
	}
	var out []Artifact
	for i, x := range list {
		field := fmt.Sprintf("artifacts[%d]", i+1)
		var a Artifact
		switch e := x.(type) {
		case string:
			a.Source = e
		case map[string]any:
			a.Source, _ = e["source"].(string)
			a.Destination, _ = e["destination"].(string)
			for k := range e {
				if k != "source" && k != "destination" {
					fail(field+"."+k, "unknown key (known: source, destination)")
				}
			}
		default:
			fail(field, "must be a path or a table {source, destination}")
			continue
		}
		if !path.IsAbs(a.Source) {
			fail(field, "source must be an absolute path inside the environment, not %q", a.Source)
			continue
		}
		a.Source = path.Clean(a.Source)
		if a.Destination == "" {
			a.Destination = path.Base(a.Source)
		}
		d := path.Clean(a.Destination)
		if path.IsAbs(d) || d == ".." || strings.HasPrefix(d, "../") || d == "." || d == "/" {
			fail(field+".destination", "must be a relative path under the trial's artifacts, not %q", a.Destination)
			continue
		}
		a.Destination = d
		out = append(out, a)
	}
	return out
}

// artifactsMount is where the host's artifacts directory is bound inside
// the layer while they are copied.
const artifactsMount = "/.harness-artifacts"

// CollectArtifacts copies the task's artifacts out of a trial's layer into
// dir (made when missing), each to its destination there. It returns the
// destinations copied and a message per artifact that could not be (a
// path the trial did not leave is one).
func CollectArtifacts(ctx context.Context, l *image.Layer, t *Task, dir string) (copied, missing []string, err error) {
	if len(t.Config.Artifacts) == 0 {
		return nil, nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("artifacts of %s: %w", t.Name, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("artifacts of %s: %w", t.Name, err)
	}
	for _, a := range t.Config.Artifacts {
		dst := path.Join(artifactsMount, a.Destination)
		// cp -a into a fresh destination: a directory's content, or a file.
		script := `set -e; test -e "$1" || { echo "$1: no such file or directory"; exit 3; }; mkdir -p "$(dirname "$2")"; rm -rf "$2"; cp -a "$1" "$2"`
		res, err := run(ctx, l, []string{"sh", "-c", script, "sh", a.Source, dst}, "/", l.Image.Env(), time.Minute,
			Step{Binds: []image.Bind{{Src: abs, Dst: artifactsMount, RW: true}}, NoNetwork: true})
		switch {
		case err != nil:
			return copied, missing, fmt.Errorf("artifacts of %s: copying %s: %w", t.Name, a.Source, err)
		case res.TimedOut:
			missing = append(missing, fmt.Sprintf("%s: the copy timed out", a.Source))
		case res.ExitCode != 0:
			missing = append(missing, fmt.Sprintf("%s: %s", a.Source, strings.TrimSpace(res.Output)))
		default:
			copied = append(copied, a.Destination)
		}
	}
	return copied, missing, nil
}
