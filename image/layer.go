package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Layer is one trial's writable layer over a read-only image. Commands run
// in it one after another (never two at once) see the image with the
// layer's changes as their root.
type Layer struct {
	Image *Image
	// Dir holds upper/ (the changes), work/ (overlayfs's), stubs/
	// (mount points the image lacks) and merged/ (the mount point).
	Dir string
	// Self is the command line that runs Main: the harness binary and
	// InitArg (default: this executable).
	Self []string
	// Overlay forces "kernel" or "fuse" ("" = kernel, fuse where the
	// kernel refuses).
	Overlay string
}

// NewLayer makes a fresh, empty layer over img in a new directory under
// parent ("" = the system temp dir).
func NewLayer(img *Image, parent string) (*Layer, error) {
	dir, err := os.MkdirTemp(parent, "harness-layer-")
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	for _, d := range []string{"upper", "work", "stubs", "merged"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("layer: %w", err)
		}
	}
	return &Layer{Image: img, Dir: dir}, nil
}

// Upper is the directory that holds the layer's changes.
func (l *Layer) Upper() string { return filepath.Join(l.Dir, "upper") }

// Remove deletes the layer and its changes.
func (l *Layer) Remove() error {
	removeTree(l.Dir)
	if _, err := os.Stat(l.Dir); err == nil {
		return fmt.Errorf("layer %s: not removed", l.Dir)
	}
	return nil
}

// Release leaves a kept layer removable by its owner without privileges
// (rm -rf): overlayfs leaves the directories of its work directory
// (work/work) with mode 000 once the mount is gone; they get the owner's
// read, write and search bits. Call it when no command runs in the layer.
func (l *Layer) Release() error {
	// WalkDir calls fn on a directory before reading it, so each
	// directory is made readable before it is listed.
	err := filepath.WalkDir(filepath.Join(l.Dir, "work"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o700 != 0o700 {
			return os.Chmod(p, fi.Mode().Perm()|0o700)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("layer %s: make removable: %w", l.Dir, err)
	}
	return nil
}

// Run describes one command to run in a layer.
type Run struct {
	// Argv is the command line; Argv[0] is looked up on the PATH of Env
	// inside the image.
	Argv []string
	// Dir is the working directory inside the image ("" = the image's
	// WORKDIR); it is made when missing.
	Dir string
	// Env is the command's whole environment ("" entries ignored); see
	// Image.Env for the image's own.
	Env []string
	// User is who the command runs as ("" = the image's USER, else root).
	User string
	// Binds are host paths made visible in the image.
	Binds []Bind
	// NoNetwork gives the command loopback only.
	NoNetwork bool
}

// Command returns the command that runs r in the layer: the harness's
// init in new namespaces, which sets up the root and runs r there. The
// caller sets Stdin, Stdout and Stderr and may add to SysProcAttr (keep
// Cloneflags and the ID maps).
func (l *Layer) Command(ctx context.Context, r Run) (*exec.Cmd, error) {
	if len(r.Argv) == 0 {
		return nil, errors.New("layer: empty command")
	}
	self := l.Self
	if len(self) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("layer: find the harness binary: %w", err)
		}
		self = []string{exe, InitArg}
	}
	userSpec := r.User
	if userSpec == "" {
		userSpec = l.Image.Config.User
	}
	u, err := l.Image.RunsAs(userSpec)
	if err != nil {
		return nil, err
	}
	dir := r.Dir
	if dir == "" {
		dir = l.Image.Workdir()
	}
	binds := append([]Bind{}, r.Binds...)
	if !r.NoNetwork {
		// Name resolution as on the host, as container runtimes do.
		for _, f := range []string{"/etc/resolv.conf", "/etc/hosts"} {
			if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() {
				binds = append(binds, Bind{Src: f})
			}
		}
	}
	binds, err = l.stubBinds(binds)
	if err != nil {
		return nil, err
	}
	spec := l.baseSpec()
	spec.Binds, spec.Argv, spec.Dir, spec.UID, spec.GID, spec.Groups = binds, r.Argv, dir, u.UID, u.GID, u.Groups
	if p, err := exec.LookPath("fuse-overlayfs"); err == nil {
		spec.FuseOverlayfs = p
	}
	spec.NoNetwork = r.NoNetwork
	hasHome := false
	for _, kv := range r.Env {
		if kv == "" {
			continue
		}
		if strings.HasPrefix(kv, "HOME=") {
			hasHome = true
		}
		spec.Env = append(spec.Env, kv)
	}
	if !hasHome {
		spec.Env = append(spec.Env, "HOME="+u.Home)
	}
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self[0], append(append([]string{}, self[1:]...), string(js))...)
	cmd.Env = []string{}
	cmd.SysProcAttr = namespaceAttr(r.NoNetwork)
	return cmd, nil
}

// baseSpec is the init's spec for the layer's overlay, without a command.
func (l *Layer) baseSpec() execSpec {
	return execSpec{
		Lower:   []string{filepath.Join(l.Dir, "stubs"), l.Image.Rootfs},
		Upper:   l.Upper(),
		Work:    filepath.Join(l.Dir, "work"),
		Merged:  filepath.Join(l.Dir, "merged"),
		Overlay: l.Overlay,
	}
}

// Argv returns a command line that runs r in the layer, for callers that
// start processes without SysProcAttr (a sandbox.Runner): the harness's
// init first runs as a plain process, which starts the namespaced one
// (as Command would) and passes its exit status and signals on.
func (l *Layer) Argv(ctx context.Context, r Run) ([]string, error) {
	cmd, err := l.Command(ctx, r)
	if err != nil {
		return nil, err
	}
	spec := cmd.Args[len(cmd.Args)-1]
	self := append([]string{cmd.Path}, cmd.Args[1:len(cmd.Args)-1]...)
	return append(self, outerArg, spec), nil
}

// outerArg marks the plain first stage of the init (see Layer.Argv).
const outerArg = "outer"

// namespaceAttr are the namespaces and ID maps of a command's init.
func namespaceAttr(noNetwork bool) *syscall.SysProcAttr {
	flags := uintptr(unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS)
	if noNetwork {
		flags |= unix.CLONE_NEWNET
	}
	attr := &syscall.SysProcAttr{Cloneflags: flags, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 {
		// Root may map every ID: the image's users keep theirs.
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1<<32 - 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1<<32 - 1}}
		attr.GidMappingsEnableSetgroups = true
	} else {
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	return attr
}

// stubBinds places each bind at its path as the image resolves it, and
// makes the mount points the image lacks in the layer's stubs directory
// (a read-only layer of its own, so they are never among the changes).
func (l *Layer) stubBinds(binds []Bind) ([]Bind, error) {
	stubs := filepath.Join(l.Dir, "stubs")
	// /dev and /proc are mounted on.
	need := []struct {
		path string
		dir  bool
	}{{"/dev", true}, {"/proc", true}}
	var out []Bind
	bound := map[string]bool{}
	for _, b := range binds {
		dst := b.Dst
		if dst == "" {
			dst = b.Src
		}
		if bound[dst] {
			continue
		}
		bound[dst] = true
		fi, err := os.Stat(b.Src)
		if err != nil {
			return nil, fmt.Errorf("bind %s: %w", b.Src, err)
		}
		dst = resolveIn(l.Image.Rootfs, dst)
		if dst == "/" {
			return nil, fmt.Errorf("bind %s: cannot bind over the image's root", b.Src)
		}
		out = append(out, Bind{Src: b.Src, Dst: dst, RW: b.RW})
		need = append(need, struct {
			path string
			dir  bool
		}{dst, fi.IsDir()})
	}
	for _, n := range need {
		inImage, err := os.Stat(filepath.Join(l.Image.Rootfs, resolveIn(l.Image.Rootfs, n.path)))
		if err == nil {
			if inImage.IsDir() != n.dir {
				return nil, fmt.Errorf("bind at %s: the image has a %s there", n.path, kindName(inImage.IsDir()))
			}
			continue
		}
		p := filepath.Join(stubs, n.path)
		// A stub's parents look like the image's own directories.
		if err := l.mkdirMirror(stubs, path.Dir(n.path)); err != nil {
			return nil, fmt.Errorf("mount point %s: %w", n.path, err)
		}
		if n.dir {
			err = l.mkdirMirror(stubs, n.path)
		} else if _, statErr := os.Stat(p); statErr != nil {
			err = os.WriteFile(p, nil, 0o644)
		} else {
			err = nil
		}
		if err != nil {
			return nil, fmt.Errorf("mount point %s: %w", n.path, err)
		}
	}
	return out, nil
}

func kindName(dir bool) string {
	if dir {
		return "directory"
	}
	return "file"
}

// Change is one path of the image the layer adds, modifies or deletes.
type Change struct {
	// Path is the absolute path inside the image.
	Path string `json:"path"`
	// Status is added, modified or deleted.
	Status string `json:"status"`
}

// Changes lists the layer's change set: every file (not directory) it
// adds or modifies and every path it deletes, sorted by path. Directories
// appear only when deleted or when added empty.
func (l *Layer) Changes() ([]Change, error) {
	upper := l.Upper()
	var out []Change
	err := filepath.WalkDir(upper, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(upper, p)
		if rel == "." {
			return nil
		}
		ip := "/" + filepath.ToSlash(rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if isWhiteout(fi) {
			out = append(out, Change{Path: ip, Status: "deleted"})
			return nil
		}
		lower, lowerErr := os.Lstat(filepath.Join(l.Image.Rootfs, ip))
		if d.IsDir() {
			if lowerErr == nil && lower.IsDir() && !isOpaque(p) {
				return nil
			}
			if lowerErr == nil && lower.IsDir() {
				// An opaque directory replaced the image's: what it
				// held is gone.
				out = append(out, Change{Path: ip, Status: "modified"})
				return nil
			}
			entries, _ := os.ReadDir(p)
			if len(entries) == 0 {
				out = append(out, Change{Path: ip, Status: "added"})
			}
			return nil
		}
		status := "added"
		if lowerErr == nil {
			status = "modified"
		}
		out = append(out, Change{Path: ip, Status: status})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("layer changes: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// isWhiteout says whether fi is overlayfs's mark of a deleted path (a 0/0
// character device).
func isWhiteout(fi fs.FileInfo) bool {
	if fi.Mode()&fs.ModeCharDevice == 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Rdev == 0
}

// isOpaque says whether an upper directory hides the image's directory
// below it.
func isOpaque(p string) bool {
	buf := make([]byte, 8)
	for _, attr := range []string{"user.overlay.opaque", "trusted.overlay.opaque"} {
		if n, err := unix.Lgetxattr(p, attr, buf); err == nil && n > 0 && buf[0] == 'y' {
			return true
		}
	}
	return false
}

// mkdirMirror makes directory p (inside the image) under base, each
// missing directory with the mode and owner the image gives it, so a layer
// above the image does not change how its directories look.
func (l *Layer) mkdirMirror(base, p string) error {
	cur := base
	imgCur := "/"
	for _, part := range strings.Split(strings.Trim(path.Clean("/"+p), "/"), "/") {
		if part == "" {
			continue
		}
		cur = filepath.Join(cur, part)
		imgCur = path.Join(imgCur, part)
		if fi, err := os.Lstat(cur); err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("%s: not a directory", imgCur)
			}
			continue
		}
		mode := fs.FileMode(0o755)
		own, hasOwner := owner{}, false
		if fi, err := os.Stat(filepath.Join(l.Image.Rootfs, resolveIn(l.Image.Rootfs, imgCur))); err == nil && fi.IsDir() {
			mode = fi.Mode() & (fs.ModePerm | fs.ModeSetgid | fs.ModeSticky)
			own, hasOwner = statOwner(fi)
		}
		if err := os.Mkdir(cur, 0o700); err != nil {
			return err
		}
		if hasOwner && os.Geteuid() == 0 {
			_ = os.Lchown(cur, own.uid, own.gid)
		}
		if err := os.Chmod(cur, mode); err != nil {
			return err
		}
	}
	return nil
}

// ReadFile reads path p (inside the image) as the layer sees it: the
// layer's version when it has one, else the image's.
func (l *Layer) ReadFile(p string) ([]byte, error) {
	clean := path.Clean("/" + p)
	// Walk down the upper directory: a whiteout or an opaque directory on
	// the way hides the image's file.
	upper := l.Upper()
	cur := upper
	hidden := false
	for _, part := range strings.Split(strings.TrimPrefix(clean, "/"), "/") {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if err != nil {
			break
		}
		if isWhiteout(fi) {
			return nil, fmt.Errorf("%s: %w", p, fs.ErrNotExist)
		}
		if fi.IsDir() && isOpaque(cur) {
			hidden = true
		}
	}
	if b, err := os.ReadFile(filepath.Join(upper, clean)); err == nil {
		return b, nil
	}
	if hidden {
		return nil, fmt.Errorf("%s: %w", p, fs.ErrNotExist)
	}
	return os.ReadFile(filepath.Join(l.Image.Rootfs, resolveIn(l.Image.Rootfs, clean)))
}

// WriteFile puts a file into the layer (between commands, never while one
// runs), as if written at path p inside the image, with its parent
// directories.
func (l *Layer) WriteFile(p string, data []byte, mode fs.FileMode) error {
	target := filepath.Join(l.Upper(), path.Clean("/"+p))
	if err := l.mkdirMirror(l.Upper(), path.Dir(path.Clean("/"+p))); err != nil {
		return err
	}
	return os.WriteFile(target, data, mode)
}

// CopyIn copies the host directory src into the layer at path dst inside
// the image (between commands), like WriteFile for each file.
func (l *Layer) CopyIn(src, dst string) error {
	if err := l.mkdirMirror(l.Upper(), path.Dir(path.Clean("/"+dst))); err != nil {
		return err
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(l.Upper(), path.Clean("/"+dst), rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, fi.Mode().Perm()|0o700)
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(t, target)
		case fi.Mode().IsRegular():
			return copyFile(p, target, fi.Mode())
		}
		return nil
	})
}

// MkdirAll makes directory p (inside the image) in the layer, between
// commands, its missing parents looking like the image's.
func (l *Layer) MkdirAll(p string) error {
	return l.mkdirMirror(l.Upper(), p)
}

// Own gives directory p (inside the image), which the layer holds (made
// by MkdirAll), to the image's user spec ("" = the image's USER), between
// commands: a command run as that user can write there. A user that maps
// to root changes nothing.
func (l *Layer) Own(p, spec string) error {
	if spec == "" {
		spec = l.Image.Config.User
	}
	u, err := l.Image.RunsAs(spec)
	if err != nil {
		return err
	}
	if u.UID == 0 && u.GID == 0 {
		return nil
	}
	if err := os.Lchown(filepath.Join(l.Upper(), path.Clean("/"+p)), u.UID, u.GID); err != nil {
		return fmt.Errorf("layer: give %s to %s: %w", p, spec, err)
	}
	return nil
}

// RemoveAll removes what the layer itself holds at path p (between
// commands); what the image has there stays visible.
func (l *Layer) RemoveAll(p string) error {
	return os.RemoveAll(filepath.Join(l.Upper(), path.Clean("/"+p)))
}
