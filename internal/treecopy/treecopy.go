// Package treecopy copies a directory tree on the local disk: directories,
// regular files and symbolic links, each caller choosing what the copy
// keeps (modes exactly or under the umask, owners), whether links are
// copied, and whether it fills an empty directory or merges into a full
// one.
//
// What every copy shares: a symbolic link is never followed (a link is
// copied as a link with the same target, or left out); FIFOs, sockets and
// devices are left out, and never opened; a hard link becomes a file of
// its own; file contents go through io.Copy, which the kernel does with
// copy_file_range (a reflink where the filesystem has them). An error
// names the path it is about.
package treecopy

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Options say what a copy keeps. The zero value copies files, directories
// and links into an empty directory, with the sources' permission bits
// under the umask, directories writable and searchable by their owner.
type Options struct {
	// SkipSymlinks leaves symbolic links out. Otherwise each is copied as
	// a link with the same target, whether it points inside the tree,
	// outside it or nowhere.
	SkipSymlinks bool
	// Merge copies into a tree that may already hold the same names:
	// directories there are kept as they are, and a file of the same name
	// (or a link, or anything else but a directory) is removed and
	// written anew, never written through. Without Merge, a name that
	// exists in the destination fails the copy.
	Merge bool
	// ExactModes gives every file and directory its source's mode
	// exactly, setuid, setgid and sticky bits included and whatever the
	// umask; a directory gets its mode once it is filled, so a read-only
	// one is copied too. Otherwise a copy is made with its source's
	// permission bits (plus FilePerm for files, plus 0o700 for
	// directories) under the umask.
	ExactModes bool
	// FilePerm are permission bits added to every file copied (without
	// ExactModes).
	FilePerm fs.FileMode
	// RootMode gives the destination directory itself the source's mode
	// (plus 0o700 without ExactModes). Otherwise it is left as it is.
	RootMode bool
	// Owners gives each copy its source's owner and group, when the
	// process runs as root and as far as its user namespace maps them;
	// otherwise it is ignored.
	Owners bool
}

// Copy copies the tree at src into the directory dst, made (with its
// parents) when missing. When src itself is a symbolic link, the
// directory it names is copied.
func Copy(src, dst string, opts Options) error {
	if fi, err := os.Lstat(src); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if src, err = filepath.EvalSymlinks(src); err != nil {
			return err
		}
	}
	info, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return fmt.Errorf("%s: not a directory", src)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	c := copier{opts: opts, owners: opts.Owners && os.Geteuid() == 0}
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		return c.entry(p, filepath.Join(dst, rel), rel == ".")
	})
	// Directories get their exact modes last, the deepest first, so that
	// none is closed before what it holds is in.
	for i := len(c.dirs) - 1; i >= 0; i-- {
		if cerr := os.Chmod(c.dirs[i].path, c.dirs[i].mode); cerr != nil && err == nil {
			err = cerr
		}
	}
	return err
}

// copier is one Copy's state.
type copier struct {
	opts   Options
	owners bool
	dirs   []dirMode // directories whose modes are set at the end
}

type dirMode struct {
	path string
	mode fs.FileMode
}

// exactBits are the mode bits ExactModes keeps.
const exactBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// entry copies the one entry at src to dst (root: the tree's top).
func (c *copier) entry(src, dst string, root bool) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	switch {
	case fi.IsDir():
		if err := c.dir(dst, fi, root); err != nil {
			return err
		}
	case fi.Mode()&fs.ModeSymlink != 0:
		if c.opts.SkipSymlinks {
			return nil
		}
		if err := c.symlink(src, dst); err != nil {
			return err
		}
	case fi.Mode().IsRegular():
		if err := c.file(src, dst, fi); err != nil {
			return err
		}
	default:
		return nil // FIFOs, sockets, devices: left out
	}
	if c.owners && !(root && !c.opts.RootMode) {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			// As far as the system allows: an owner the user
			// namespace does not map stays the copier's.
			if err := os.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil {
				return nil
			}
			// A chown clears setuid and setgid: put them back.
			if fi.Mode().IsRegular() && c.opts.ExactModes {
				return os.Chmod(dst, fi.Mode()&exactBits)
			}
		}
	}
	return nil
}

func (c *copier) dir(dst string, fi fs.FileInfo, root bool) error {
	switch {
	case root:
		if !c.opts.RootMode {
			return nil
		}
		if !c.opts.ExactModes {
			return os.Chmod(dst, fi.Mode().Perm()|0o700)
		}
	case c.opts.Merge:
		if err := os.MkdirAll(dst, fi.Mode().Perm()|0o700); err != nil {
			return err
		}
		if st, err := os.Lstat(dst); err != nil || !st.IsDir() {
			return fmt.Errorf("%s: not a directory", dst)
		}
	default:
		if err := os.Mkdir(dst, fi.Mode().Perm()|0o700); err != nil {
			return err
		}
	}
	if c.opts.ExactModes {
		c.dirs = append(c.dirs, dirMode{dst, fi.Mode() & (fs.ModePerm | fs.ModeSetgid | fs.ModeSticky)})
	}
	return nil
}

func (c *copier) symlink(src, dst string) error {
	target, err := os.Readlink(src)
	if err != nil {
		return err
	}
	if err := c.clear(dst); err != nil {
		return err
	}
	return os.Symlink(target, dst)
}

// clear removes what stands at dst in a merge (but a directory).
func (c *copier) clear(dst string) error {
	if !c.opts.Merge {
		return nil
	}
	st, err := os.Lstat(dst)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case st.IsDir():
		return fmt.Errorf("%s: a directory where the source has a file", dst)
	}
	return os.Remove(dst)
}

func (c *copier) file(src, dst string, fi fs.FileInfo) error {
	// Never a final link, never blocking on a FIFO swapped in for the
	// file since it was listed.
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	if st, err := in.Stat(); err != nil {
		return err
	} else if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", src)
	}
	if err := c.clear(dst); err != nil {
		return err
	}
	mode := fi.Mode().Perm() | c.opts.FilePerm
	if c.opts.ExactModes {
		mode = fi.Mode().Perm() | 0o200
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if err := out.Close(); err != nil {
		return err
	}
	if c.opts.ExactModes {
		return os.Chmod(dst, fi.Mode()&exactBits)
	}
	return nil
}
