package workspace

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"harness/schemas"
)

// gitTimeout bounds each git command.
const gitTimeout = 2 * time.Minute

// gitApply applies a patch file in dir with git, reading no configuration
// but its own: no user or system config, no hooks, no attributes from the
// tree.
func gitApply(dir, patch string) error {
	ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "-C", dir, "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
		"-c", "core.autocrlf=false", "-c", "core.attributesFile=/dev/null",
		"apply", "--whitespace=nowarn", patch)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
		"GIT_DIR=/nonexistent-harness-git-dir")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git apply: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// Rebuild makes dst (an empty or missing directory) what a record's
// workspace was when the case ended: a copy of the template with the
// recorded changes applied (text files from their diffs, binary files from
// their content). It fails when a change cannot be replayed exactly (a
// diff cut for size, a binary file too large to keep). Changes inside a
// .git directory are not replayed.
func Rebuild(template string, ws *schemas.Workspace, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if err := copyTree(template, dst); err != nil {
		return fmt.Errorf("copy %s: %w", template, err)
	}
	return ApplyChanges(ws, dst)
}

// ApplyChanges makes dst, a copy of a record's workspace template as it
// was when the case began, what the workspace was when the case ended: the
// recorded changes applied (text files from their diffs, binary files from
// their content). It fails when a change cannot be replayed exactly (a
// diff cut for size, a binary file too large to keep). Changes inside a
// .git directory are not replayed.
func ApplyChanges(ws *schemas.Workspace, dst string) error {
	// A record is input: its paths may be forged. Every file is reached
	// through dst as a root, so no path (.., an absolute one, a link on
	// the way) leads out of it.
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, c := range ws.FileChanges {
		if inGitDir(c.Path) {
			continue
		}
		for _, p := range []string{c.Path, c.From} {
			if p != "" && !filepath.IsLocal(filepath.FromSlash(p)) {
				return fmt.Errorf("file change %q: not a path inside the workspace", p)
			}
		}
		target := filepath.FromSlash(c.Path)
		switch {
		case c.Status == "deleted" && c.Diff == "":
			root.Remove(target)
			continue
		case c.Binary:
			if c.Status == "renamed" && c.From != "" {
				root.Remove(filepath.FromSlash(c.From))
			}
			if c.Status == "deleted" {
				root.Remove(target)
				continue
			}
			if c.Content == "" && c.Size > 0 {
				return fmt.Errorf("%s: a binary file whose content was not kept (over %d bytes)", c.Path, maxBinaryContent)
			}
			b, err := base64.StdEncoding.DecodeString(c.Content)
			if err != nil {
				return fmt.Errorf("%s: %w", c.Path, err)
			}
			if dir := filepath.Dir(target); dir != "." {
				root.MkdirAll(dir, 0o755)
			}
			if err := root.WriteFile(target, b, 0o644); err != nil {
				return fmt.Errorf("%s: %w", c.Path, err)
			}
			continue
		}
		if strings.Contains(c.Diff, "[diff truncated]") {
			return fmt.Errorf("%s: its diff was cut for size", c.Path)
		}
		if c.Diff == "" {
			continue // a file with no content change
		}
		// Records of older versions hold the diffs of a nested repository
		// relative to it: such a change is applied there.
		dir := dst
		if i := strings.Index(c.Diff, " b/"); strings.HasPrefix(c.Diff, "diff --git a/") && i > 0 {
			inRepo := strings.SplitN(c.Diff[i+3:], "\n", 2)[0]
			if prefix, ok := strings.CutSuffix(c.Path, inRepo); ok && prefix != "" {
				dir = filepath.Join(dst, filepath.FromSlash(strings.TrimSuffix(prefix, "/")))
			}
		}
		patch, err := os.CreateTemp("", "harness-patch-")
		if err != nil {
			return err
		}
		_, err = patch.WriteString(c.Diff)
		patch.Close()
		if err == nil {
			err = gitApply(dir, patch.Name())
		}
		os.Remove(patch.Name())
		if err != nil {
			return fmt.Errorf("%s: %w", c.Path, err)
		}
	}
	return nil
}

// inGitDir says whether a slash path lies inside a .git directory.
func inGitDir(p string) bool {
	for _, s := range strings.Split(p, "/") {
		if s == ".git" {
			return true
		}
	}
	return false
}
