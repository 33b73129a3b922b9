package workspace

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/aymanbagabas/go-udiff"

	"harness/schemas"
)

// The workspace's changes are found by harness itself, in Go, never by
// running a program on the tree the agent left: git, for one, reads the
// repository's config, attributes and hooks, so a workspace whose
// .git/config names an fsmonitor command, or whose .gitattributes names a
// filter or diff driver, would run that command on the host. Nothing is
// read through a symbolic link, and no file outside the workspace is ever
// opened (every open goes through an os.Root on the workspace).

// maxBinaryContent is the largest binary file whose content a record
// keeps.
const maxBinaryContent = 1 << 20

// maxHashedFile is the largest file compared by content; larger files are
// compared by size and mode alone.
const maxHashedFile = 256 << 20

// treeEntry is one regular file or symbolic link of a tree.
type treeEntry struct {
	size int64
	mode fs.FileMode // permission bits, and fs.ModeSymlink for links
	link string      // a link's target
	sum  [32]byte    // a file's SHA-256 (zero when over maxHashedFile)
}

func (e treeEntry) isLink() bool { return e.mode&fs.ModeSymlink != 0 }

// tree is a listing of a directory: its regular files and symbolic links
// by slash-separated path, and the .gitignore rules it holds.
type tree struct {
	entries map[string]treeEntry
	ignore  *ignoreRules
}

// gitInternal says whether rel is bulk git data inside a repository's .git
// directory (objects, logs, the index): not a change anyone reviews. The
// rest of .git (config, hooks, refs, HEAD) is listed, apart from the work
// tree's changes (see splitGit), so a change there shows on the record.
func gitInternal(rel string) bool {
	segs := strings.Split(rel, "/")
	for i, s := range segs {
		if s != ".git" || i+1 >= len(segs) {
			continue
		}
		switch segs[i+1] {
		case "objects", "logs", "index", "lfs", "modules":
			return true
		}
	}
	return false
}

// listTree lists dir. With ignore nil, the tree's own .gitignore files are
// read and returned in the listing (a baseline); otherwise the given rules
// decide what is skipped (the workspace the agent left, judged by the
// baseline's rules).
func listTree(dir string, ignore *ignoreRules) (*tree, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	t := &tree{entries: map[string]treeEntry{}, ignore: ignore}
	collect := ignore == nil
	if collect {
		t.ignore = &ignoreRules{}
	}
	var walk func(rel string) error
	walk = func(rel string) error {
		name := rel
		if name == "" {
			name = "."
		}
		d, err := root.Open(name)
		if err != nil {
			if rel != "" && errors.Is(err, fs.ErrNotExist) {
				return nil // removed while listing
			}
			return err
		}
		ents, err := d.ReadDir(-1)
		d.Close()
		if err != nil {
			return err
		}
		sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
		if collect {
			for _, e := range ents {
				if e.Name() == ".gitignore" && e.Type().IsRegular() {
					if b, err := readRootFile(root, path.Join(rel, ".gitignore"), 1<<20); err == nil {
						t.ignore.add(rel, b)
					}
				}
			}
		}
		for _, e := range ents {
			p := path.Join(rel, e.Name())
			if gitInternal(p) {
				continue
			}
			switch {
			case e.IsDir():
				if t.ignore.ignored(p, true) {
					continue
				}
				if err := walk(p); err != nil {
					return err
				}
			case e.Type()&fs.ModeSymlink != 0:
				if t.ignore.ignored(p, false) {
					continue
				}
				target, err := root.Readlink(p)
				if err != nil {
					continue
				}
				t.entries[p] = treeEntry{size: int64(len(target)), mode: fs.ModeSymlink, link: target}
			case e.Type().IsRegular():
				if t.ignore.ignored(p, false) {
					continue
				}
				ent, err := hashRootFile(root, p)
				if err != nil {
					continue // replaced by something else, or unreadable
				}
				t.entries[p] = ent
			}
		}
		return nil
	}
	if err := walk(""); err != nil {
		return nil, err
	}
	return t, nil
}

// openRootFile opens a plain file inside root: never through a final
// symbolic link (and, by os.Root, never out of the tree through any),
// never blocking on a FIFO or a device swapped in for the file.
func openRootFile(root *os.Root, rel string) (*os.File, fs.FileInfo, error) {
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: not a regular file", rel)
	}
	return f, info, nil
}

func hashRootFile(root *os.Root, rel string) (treeEntry, error) {
	f, info, err := openRootFile(root, rel)
	if err != nil {
		return treeEntry{}, err
	}
	defer f.Close()
	// As git does, only the executable bit counts: a file rewritten
	// under another umask is not a change.
	mode := fs.FileMode(0o644)
	if info.Mode().Perm()&0o111 != 0 {
		mode = 0o755
	}
	ent := treeEntry{size: info.Size(), mode: mode}
	if info.Size() > maxHashedFile {
		return ent, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return treeEntry{}, err
	}
	copy(ent.sum[:], h.Sum(nil))
	return ent, nil
}

// readRootFile reads a plain file inside root, of at most max bytes.
func readRootFile(root *os.Root, rel string, max int64) ([]byte, error) {
	f, _, err := openRootFile(root, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		err = fmt.Errorf("%s: larger than %d bytes", rel, max)
	}
	return b, err
}

// sameEntry says whether two entries have the same type, mode and content.
func sameEntry(a, b treeEntry) bool {
	return a.mode == b.mode && a.size == b.size && a.link == b.link && a.sum == b.sum
}

// diffTrees lists what changed from the tree at baseDir (listed as base)
// to the tree at dir: added, modified, deleted and renamed files, with
// git-style unified diffs for text and the content of small binary files.
func diffTrees(baseDir string, base *tree, dir string) ([]schemas.FileChange, error) {
	after, err := listTree(dir, base.ignore)
	if err != nil {
		return nil, err
	}
	var added, deleted []string
	changes := []schemas.FileChange{}
	oldRoot, err := os.OpenRoot(baseDir)
	if err != nil {
		return nil, err
	}
	defer oldRoot.Close()
	newRoot, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer newRoot.Close()
	for p, a := range after.entries {
		b, ok := base.entries[p]
		switch {
		case !ok:
			added = append(added, p)
		case !sameEntry(a, b):
			changes = append(changes, describe(oldRoot, newRoot, p, p, "modified", &b, &a))
		}
	}
	for p := range base.entries {
		if _, ok := after.entries[p]; !ok {
			deleted = append(deleted, p)
		}
	}
	sort.Strings(added)
	sort.Strings(deleted)
	// A file that left one path and appeared at another with the same
	// content was renamed, within the work tree or within .git (each is
	// listed on its own).
	type renameKey struct {
		e   treeEntry
		git bool
	}
	byContent := map[renameKey][]string{}
	for _, p := range deleted {
		e := base.entries[p]
		if e.sum != ([32]byte{}) || e.isLink() {
			k := renameKey{e, inGitDir(p)}
			byContent[k] = append(byContent[k], p)
		}
	}
	renamedFrom := map[string]bool{}
	for _, p := range added {
		a := after.entries[p]
		k := renameKey{a, inGitDir(p)}
		if from := byContent[k]; len(from) > 0 {
			byContent[k] = from[1:]
			renamedFrom[from[0]] = true
			changes = append(changes, schemas.FileChange{Path: p, Status: "renamed", From: from[0], Size: a.size,
				Diff: fmt.Sprintf("diff --git a/%s b/%s\nsimilarity index 100%%\nrename from %s\nrename to %s\n", from[0], p, from[0], p)})
			continue
		}
		changes = append(changes, describe(oldRoot, newRoot, p, p, "added", nil, &a))
	}
	for _, p := range deleted {
		if !renamedFrom[p] {
			b := base.entries[p]
			changes = append(changes, describe(oldRoot, newRoot, p, p, "deleted", &b, nil))
		}
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].Path < changes[j].Path })
	return changes, nil
}

// splitGit parts a tree's changes into the work tree's and those inside a
// repository's .git (a .git directory or file at any depth). The record
// keeps no content for a binary file under .git: what is worth reviewing
// there (config, hooks, refs) is text, with its diff.
func splitGit(changes []schemas.FileChange) (files, git []schemas.FileChange) {
	for _, c := range changes {
		if !inGitDir(c.Path) {
			files = append(files, c)
			continue
		}
		c.Content = ""
		git = append(git, c)
	}
	return files, git
}

// describe makes the change record of one path: a git-style diff for text
// (symbolic links diff as their target), the content of a small binary
// file.
func describe(oldRoot, newRoot *os.Root, oldPath, newPath, status string, before, after *treeEntry) schemas.FileChange {
	c := schemas.FileChange{Path: newPath, Status: status}
	if after != nil {
		c.Size = after.size
	}
	old, oldText := entryText(oldRoot, oldPath, before)
	cur, curText := entryText(newRoot, newPath, after)
	if !oldText || !curText {
		c.Binary = true
		if after != nil && !after.isLink() && after.size <= maxBinaryContent {
			if b, err := readRootFile(newRoot, newPath, maxBinaryContent); err == nil {
				c.Content = base64.StdEncoding.EncodeToString(b)
			}
		}
		return c
	}
	var head strings.Builder
	fmt.Fprintf(&head, "diff --git a/%s b/%s\n", oldPath, newPath)
	from, to := "a/"+oldPath, "b/"+newPath
	switch {
	case before == nil:
		fmt.Fprintf(&head, "new file mode %s\n", gitMode(after))
		from = "/dev/null"
	case after == nil:
		fmt.Fprintf(&head, "deleted file mode %s\n", gitMode(before))
		to = "/dev/null"
	case gitMode(before) != gitMode(after):
		fmt.Fprintf(&head, "old mode %s\nnew mode %s\n", gitMode(before), gitMode(after))
	}
	body := udiff.Unified(from, to, old, cur)
	d := head.String() + body
	if len(d) > maxDiffBytes {
		d = d[:maxDiffBytes] + "\n[diff truncated]\n"
	}
	c.Diff = d
	return c
}

// gitMode is an entry's mode as git writes it.
func gitMode(e *treeEntry) string {
	switch {
	case e.isLink():
		return "120000"
	case e.mode&0o111 != 0:
		return "100755"
	default:
		return "100644"
	}
}

// entryText returns an entry's text (a link's target); ok is false for
// binary or large files, or a file that is not what was listed.
func entryText(root *os.Root, rel string, e *treeEntry) (string, bool) {
	if e == nil {
		return "", true
	}
	if e.isLink() {
		return e.link, true
	}
	if e.size > maxDiffBytes {
		return "", false
	}
	b, err := readRootFile(root, rel, maxDiffBytes)
	if err != nil || bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b) || sha256.Sum256(b) != e.sum {
		return "", false
	}
	return string(b), true
}
