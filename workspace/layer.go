package workspace

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"harness/image"
	"harness/schemas"
)

// LayerChanges takes the changes of an image layer: the files of the
// working directory workdir (a path inside the image) as the work tree's
// and .git's file changes, with diffs against the image, and the other
// paths by path and status as outside changes. Paths inside the image for
// which skip says true (the verifier's own files) are left out.
func LayerChanges(l *image.Layer, workdir string, skip func(path string) bool) (files, git []schemas.FileChange, outside []schemas.PathChange, err error) {
	changes, outside, err := layerChanges(l, workdir, skip)
	files, git = splitGit(changes)
	return files, git, outside, err
}

func layerChanges(l *image.Layer, workdir string, skip func(string) bool) ([]schemas.FileChange, []schemas.PathChange, error) {
	all, err := l.Changes()
	if err != nil {
		return nil, nil, err
	}
	wd := path.Clean(workdir)
	var outside []schemas.PathChange
	var inside []image.Change
	for _, c := range all {
		rel, ok := strings.CutPrefix(c.Path, strings.TrimSuffix(wd, "/")+"/")
		switch {
		case wd == "/" && !skip(c.Path):
			inside = append(inside, image.Change{Path: strings.TrimPrefix(c.Path, "/"), Status: c.Status})
		case ok:
			inside = append(inside, image.Change{Path: rel, Status: c.Status})
		case skip(c.Path):
		default:
			outside = append(outside, schemas.PathChange{Path: c.Path, Status: c.Status})
		}
	}
	if len(inside) == 0 {
		return nil, outside, nil
	}
	oldDir := filepath.Join(l.Image.Rootfs, wd)
	newDir := filepath.Join(l.Upper(), wd)
	oldRoot, err := os.OpenRoot(oldDir)
	if err != nil {
		oldRoot = nil
	}
	newRoot, err := os.OpenRoot(newDir)
	if err != nil {
		return nil, outside, err
	}
	defer newRoot.Close()
	if oldRoot != nil {
		defer oldRoot.Close()
	}
	var out []schemas.FileChange
	for _, c := range inside {
		var before, after *treeEntry
		if oldRoot != nil && c.Status != "added" {
			if e, err := entryAt(oldRoot, c.Path); err == nil {
				before = &e
			}
		}
		if c.Status != "deleted" {
			e, err := entryAt(newRoot, c.Path)
			if err != nil {
				// An added directory: no file to describe.
				continue
			}
			after = &e
		}
		if before == nil && after == nil {
			continue
		}
		out = append(out, describe(oldRootOr(oldRoot, newRoot), newRoot, c.Path, c.Path, c.Status, before, after))
	}
	return out, outside, nil
}

func oldRootOr(old, fallback *os.Root) *os.Root {
	if old != nil {
		return old
	}
	return fallback
}

// entryAt lists one regular file or symbolic link inside root.
func entryAt(root *os.Root, rel string) (treeEntry, error) {
	fi, err := root.Lstat(rel)
	if err != nil {
		return treeEntry{}, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := root.Readlink(rel)
		if err != nil {
			return treeEntry{}, err
		}
		return treeEntry{mode: fs.ModeSymlink, link: target, size: int64(len(target))}, nil
	}
	if !fi.Mode().IsRegular() {
		return treeEntry{}, fmt.Errorf("%s: not a file", rel)
	}
	return hashRootFile(root, rel)
}
