package capture

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"harness/internal/safefile"
	"harness/schemas"
)

// maxBinaryContent is the largest binary file whose content a record
// keeps.
const maxBinaryContent = 1 << 20

// gitTimeout bounds each git command on a workspace.
const gitTimeout = 2 * time.Minute

// git runs git in dir with a fixed identity, no hooks and no user or system
// configuration, and returns its stdout.
func git(dir string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
	defer cancel()
	base := []string{"-C", dir, "-c", "user.name=harness", "-c", "user.email=harness@localhost",
		"-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false", "-c", "core.autocrlf=false", "-c", "core.quotepath=off"}
	cmd := exec.CommandContext(ctx, "git", append(base, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// baseline commits the workspace as it is, before the agent starts: the
// template's own history is kept when it is a repository (the baseline is
// a commit on top of it), otherwise a repository is made. Repositories
// nested inside get a baseline of their own. It returns the repositories
// (relative paths, "" for the root) and their baseline commits.
func baseline(ws string) (map[string]string, error) {
	repos := []string{""}
	filepath.WalkDir(ws, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || path == ws {
			return nil
		}
		if d.Name() == ".git" || d.Name() == "node_modules" {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(path, ".git")); err == nil {
			rel, _ := filepath.Rel(ws, path)
			repos = append(repos, filepath.ToSlash(rel))
		}
		return nil
	})
	// Inner repositories first: the outer one records each as a commit
	// of it, which must exist.
	sort.Slice(repos, func(i, j int) bool {
		return strings.Count(repos[i], "/")+len(repos[i]) > strings.Count(repos[j], "/")+len(repos[j])
	})
	bases := map[string]string{}
	for _, rel := range repos {
		dir := filepath.Join(ws, rel)
		if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
			if _, err := git(dir, "init", "-q"); err != nil {
				return nil, err
			}
		}
		if _, err := git(dir, "add", "-A"); err != nil {
			return nil, err
		}
		if _, err := git(dir, "commit", "-q", "--allow-empty", "--no-verify", "-m", "harness baseline"); err != nil {
			return nil, err
		}
		head, err := git(dir, "rev-parse", "HEAD")
		if err != nil {
			return nil, err
		}
		bases[rel] = strings.TrimSpace(string(head))
	}
	return bases, nil
}

// gitChanges lists what changed in the workspace since its baselines:
// added, modified, deleted, renamed and binary files, in the root
// repository and in nested ones (paths relative to the workspace).
func gitChanges(ws string, bases map[string]string) ([]schemas.FileChange, error) {
	changes := []schemas.FileChange{}
	for rel, base := range bases {
		dir := filepath.Join(ws, rel)
		if _, err := git(dir, "add", "-A"); err != nil {
			return nil, err
		}
		out, err := git(dir, "diff", "--cached", "-M", "--name-status", "-z", base)
		if err != nil {
			return nil, err
		}
		numstat, err := git(dir, "diff", "--cached", "-M", "--numstat", "-z", base)
		if err != nil {
			return nil, err
		}
		binary := binaryPaths(numstat)
		fields := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		for i := 0; i < len(fields); i++ {
			st := fields[i]
			if st == "" || i+1 >= len(fields) {
				continue
			}
			path, from := fields[i+1], ""
			i++
			if st[0] == 'R' || st[0] == 'C' {
				if i+1 >= len(fields) {
					break
				}
				from, path = path, fields[i+1]
				i++
			}
			if isNestedRepo(path, rel, bases) {
				continue // a nested repository: listed by its own diff
			}
			c := schemas.FileChange{Path: joinRel(rel, path)}
			switch st[0] {
			case 'A':
				c.Status = "added"
			case 'D':
				c.Status = "deleted"
			case 'R':
				c.Status, c.From = "renamed", joinRel(rel, from)
			default:
				c.Status = "modified"
			}
			if info, err := os.Lstat(filepath.Join(dir, path)); err == nil && c.Status != "deleted" {
				c.Size = info.Size()
			}
			if binary[path] {
				c.Binary = true
				if c.Status != "deleted" {
					if b, err := safefile.Read(filepath.Join(dir, path), maxBinaryContent); err == nil {
						c.Content = base64.StdEncoding.EncodeToString(b)
					}
				}
			} else {
				// Both names of a rename, or git sees an add and a delete.
				spec := []string{path}
				if from != "" {
					spec = append(spec, from)
				}
				diff, err := git(dir, append([]string{"diff", "--cached", "-M", base, "--"}, spec...)...)
				if err == nil {
					d := string(diff)
					if len(d) > maxDiffBytes {
						d = d[:maxDiffBytes] + "\n[diff truncated]\n"
					}
					c.Diff = d
				}
			}
			changes = append(changes, c)
		}
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].Path < changes[j].Path })
	return changes, nil
}

// binaryPaths reads git diff --numstat -z: binary files count "-\t-".
func binaryPaths(numstat []byte) map[string]bool {
	out := map[string]bool{}
	parts := strings.Split(string(numstat), "\x00")
	for i := 0; i < len(parts); i++ {
		f := strings.SplitN(parts[i], "\t", 3)
		if len(f) < 3 {
			continue
		}
		path := f[2]
		if path == "" && i+2 < len(parts) { // a rename: old and new follow
			path = parts[i+2]
			i += 2
		}
		if f[0] == "-" && f[1] == "-" {
			out[path] = true
		}
	}
	return out
}

func joinRel(repo, path string) string {
	if repo == "" {
		return path
	}
	return repo + "/" + path
}

// isNestedRepo says whether path (in repository rel) is a nested
// repository with a baseline of its own.
func isNestedRepo(path, rel string, bases map[string]string) bool {
	_, ok := bases[joinRel(rel, path)]
	return ok && joinRel(rel, path) != rel
}

// gitAvailable reports whether git can be run here.
func gitAvailable() bool {
	_, err := exec.LookPath("git")
	return err == nil
}

// Rebuild makes dst (an empty or missing directory) what a record's
// workspace was when the case ended: a copy of the template with the
// recorded changes applied (text files from their diffs, binary files from
// their content). It fails when a change cannot be replayed exactly (a
// diff cut for size, a binary file too large to keep).
func Rebuild(template string, ws *schemas.Workspace, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if err := copyTree(template, dst); err != nil {
		return fmt.Errorf("copy %s: %w", template, err)
	}
	if _, err := baseline(dst); err != nil {
		return err
	}
	for _, c := range ws.FileChanges {
		target := filepath.Join(dst, filepath.FromSlash(c.Path))
		switch {
		case c.Status == "deleted" && c.Diff == "":
			os.Remove(target)
			continue
		case c.Binary:
			if c.Status == "renamed" && c.From != "" {
				os.Remove(filepath.Join(dst, filepath.FromSlash(c.From)))
			}
			if c.Status == "deleted" {
				os.Remove(target)
				continue
			}
			if c.Content == "" && c.Size > 0 {
				return fmt.Errorf("%s: a binary file whose content was not kept (over %d bytes)", c.Path, maxBinaryContent)
			}
			b, err := base64.StdEncoding.DecodeString(c.Content)
			if err != nil {
				return fmt.Errorf("%s: %w", c.Path, err)
			}
			os.MkdirAll(filepath.Dir(target), 0o755)
			if err := os.WriteFile(target, b, 0o644); err != nil {
				return err
			}
			continue
		}
		if strings.Contains(c.Diff, "[diff truncated]") {
			return fmt.Errorf("%s: its diff was cut for size", c.Path)
		}
		if c.Diff == "" {
			continue // a mode change, or a file with no content change
		}
		// The diff's paths are relative to its repository: a change in a
		// nested one is applied there.
		dir := dst
		if i := strings.Index(c.Diff, " b/"); strings.HasPrefix(c.Diff, "diff --git a/") && i > 0 {
			inRepo := strings.SplitN(c.Diff[i+3:], "\n", 2)[0]
			if prefix, ok := strings.CutSuffix(c.Path, inRepo); ok && prefix != "" {
				dir = filepath.Join(dst, filepath.FromSlash(strings.TrimSuffix(prefix, "/")))
			}
		}
		patch := filepath.Join(os.TempDir(), fmt.Sprintf("harness-patch-%d", time.Now().UnixNano()))
		if err := os.WriteFile(patch, []byte(c.Diff), 0o600); err != nil {
			return err
		}
		_, err := git(dir, "apply", "--whitespace=nowarn", patch)
		os.Remove(patch)
		if err != nil {
			return fmt.Errorf("%s: %w", c.Path, err)
		}
	}
	return nil
}
