// Package image gives each trial a task's system without a container
// daemon: it resolves an image reference (a root filesystem directory or
// tar, an OCI layout, a local podman/buildah image, or a build context with
// a Dockerfile), unpacks it once into a cache, and runs commands with a
// fresh writable layer over the read-only image mounted as their root.
//
// A Layer is one trial's writable upper directory. Each command run in it
// (the agent, then the verifier) re-executes the harness binary as a small
// init (Main) in a user, mount and PID namespace of its own: it mounts the
// image and the layer with kernel overlayfs (fuse-overlayfs where the kernel
// refuses), binds in what the command needs from the host read-only, pivots
// into the result and runs the command there. Nothing the command writes
// reaches the image cache or the host: it all lands in the layer's upper
// directory, which is also the trial's exact change set.
package image

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultPath is the PATH of an image whose configuration sets none.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Config is the part of an image's configuration that applies to the
// commands run in it.
type Config struct {
	// Env is the image's environment (ENV), as KEY=VALUE.
	Env []string `json:"env,omitempty"`
	// WorkingDir is the image's WORKDIR ("" = /).
	WorkingDir string `json:"workingDir,omitempty"`
	// User is the image's USER: a name or uid, with an optional :group.
	User string `json:"user,omitempty"`
}

// Image is a resolved image: a read-only root filesystem and its
// configuration.
type Image struct {
	// Ref is the reference it was resolved from.
	Ref string `json:"ref"`
	// Kind says what Ref was: dir, tar, oci, local or build.
	Kind string `json:"kind"`
	// ID identifies the content (a hash or the image ID); "" for a
	// directory used in place.
	ID string `json:"id,omitempty"`
	// Digest is the registry's manifest digest of a pulled image, else
	// ID.
	Digest string `json:"digest,omitempty"`
	// Source says where the image came from: SourcePulled, SourceBuilt
	// or SourceLocal.
	Source string `json:"source,omitempty"`
	// Size is the bytes of the unpacked root filesystem in the cache (0
	// for a directory used in place).
	Size int64 `json:"size,omitempty"`
	// Rootfs is the unpacked root filesystem; never written to.
	Rootfs string `json:"rootfs"`
	// Config is the image's configuration.
	Config Config `json:"config"`
	// Made says this resolve made the image's cache entry (built it, or
	// unpacked it from a tar, an OCI layout or podman's storage); false
	// when the entry was in the cache already, or for a directory used
	// in place.
	Made bool `json:"-"`
	// InCache says a packed image's cache entry was there when it was
	// prepared (Store.Prepare): its trials will likely not unpack it.
	InCache bool `json:"-"`

	// key and unpack make a packed image's cache entry (Store.Acquire).
	key    string
	unpack func(img *Image, rootfs string) error
}

// Packed says the image is not unpacked yet (Store.Prepare): Store.Acquire
// unpacks it, and its Rootfs is "" until then.
func (img *Image) Packed() bool { return img.unpack != nil && img.Rootfs == "" }

// Where an image came from (Image.Source).
const (
	// SourcePulled: fetched from a registry into the store.
	SourcePulled = "pulled"
	// SourceBuilt: built from a Dockerfile.
	SourceBuilt = "built"
	// SourceLocal: a root filesystem, tar or OCI layout on disk, or an
	// image from podman's local storage.
	SourceLocal = "local"
)

// Workdir is the directory commands start in: the image's WORKDIR, or /.
func (img *Image) Workdir() string {
	if img.Config.WorkingDir == "" {
		return "/"
	}
	return path.Clean("/" + img.Config.WorkingDir)
}

// Env returns the image's environment with PATH set (DefaultPath when the
// image names none).
func (img *Image) Env() []string {
	env := append([]string{}, img.Config.Env...)
	for _, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			return env
		}
	}
	return append(env, "PATH="+DefaultPath)
}

// User is a user of an image, resolved from its /etc/passwd and
// /etc/group.
type User struct {
	UID, GID int
	Home     string
	// Groups are its supplementary groups: those of the image's
	// /etc/group that list it as a member (by name), in file order.
	Groups []int
}

// LookupUser resolves spec (the image's USER: "", "name", "uid",
// "name:group", "uid:gid") against the image's /etc/passwd and /etc/group.
// "" is root.
func (img *Image) LookupUser(spec string) (User, error) {
	if spec == "" {
		spec = "root"
	}
	name, group, hasGroup := strings.Cut(spec, ":")
	u := User{UID: -1, GID: -1}
	login := ""
	passwd, _ := os.ReadFile(img.hostPath("/etc/passwd"))
	for _, line := range strings.Split(string(passwd), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 7 {
			continue
		}
		if f[0] == name || f[2] == name {
			u.UID, _ = strconv.Atoi(f[2])
			u.GID, _ = strconv.Atoi(f[3])
			u.Home = f[5]
			login = f[0]
			break
		}
	}
	if u.UID < 0 {
		n, err := strconv.Atoi(name)
		if err != nil {
			return User{}, fmt.Errorf("image user %q: not in the image's /etc/passwd", spec)
		}
		u.UID, u.GID, u.Home = n, n, "/"
	}
	if name == "root" || u.UID == 0 && u.Home == "/" {
		u.Home = "/root"
	}
	if hasGroup {
		gid, err := strconv.Atoi(group)
		if err != nil {
			groups, _ := os.ReadFile(img.hostPath("/etc/group"))
			gid = -1
			for _, line := range strings.Split(string(groups), "\n") {
				f := strings.Split(line, ":")
				if len(f) >= 3 && f[0] == group {
					gid, _ = strconv.Atoi(f[2])
				}
			}
			if gid < 0 {
				return User{}, fmt.Errorf("image user %q: group %q not in the image's /etc/group", spec, group)
			}
		}
		u.GID = gid
	}
	u.Groups = img.memberOf(login)
	return u, nil
}

// memberOf lists the groups of the image's /etc/group that name login
// among their members.
func (img *Image) memberOf(login string) []int {
	if login == "" {
		return nil
	}
	groups, _ := os.ReadFile(img.hostPath("/etc/group"))
	var out []int
	for _, line := range strings.Split(string(groups), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 4 {
			continue
		}
		gid, err := strconv.Atoi(f[2])
		if err != nil {
			continue
		}
		for _, m := range strings.Split(f[3], ",") {
			if strings.TrimSpace(m) == login {
				out = append(out, gid)
				break
			}
		}
	}
	return out
}

// RunsAs resolves spec as LookupUser does and checks that a command can
// run as that user here: as root every user of the image can (the whole ID
// range is mapped); without root only the image's root user is mapped (to
// the invoking user), so any other is refused.
func (img *Image) RunsAs(spec string) (User, error) {
	u, err := img.LookupUser(spec)
	if err != nil {
		return User{}, err
	}
	if os.Geteuid() != 0 && (u.UID != 0 || u.GID != 0) {
		if spec == "" {
			spec = "root"
		}
		return User{}, fmt.Errorf("image user %q (uid %d): only root maps to the invoking user without privileges; run as root or give the command user root", spec, u.UID)
	}
	return u, nil
}

// hostPath is where path p of the image is on the host, following the
// image's symlinks inside the image.
func (img *Image) hostPath(p string) string {
	return filepath.Join(img.Rootfs, resolveIn(img.Rootfs, p))
}

// Exists says whether path p exists in the image (symlinks followed
// inside the image).
func (img *Image) Exists(p string) bool {
	_, err := os.Lstat(img.hostPath(p))
	return err == nil
}

// resolveIn resolves path p inside root the way the kernel would once root
// is "/": symlinks are followed, absolute ones relative to root, and ".."
// never leaves root. The result is an absolute path inside root; its last
// component is not followed when it is a symlink whose target is missing.
func resolveIn(root, p string) string {
	parts := strings.Split(strings.Trim(path.Clean("/"+p), "/"), "/")
	cur := "/"
	for hops := 0; len(parts) > 0; {
		part := parts[0]
		parts = parts[1:]
		if part == "" || part == "." {
			continue
		}
		if part == ".." {
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, part)
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		hops++
		if hops > 40 {
			return next
		}
		target, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			cur = next
			continue
		}
		if strings.HasPrefix(target, "/") {
			cur = "/"
		}
		parts = append(strings.Split(strings.Trim(target, "/"), "/"), parts...)
	}
	return cur
}

// writeMeta saves img's description beside its root filesystem.
func writeMeta(dir string, img *Image) error {
	b, err := json.MarshalIndent(img, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "image.json"), append(b, '\n'), 0o644)
}

// readMeta loads what writeMeta saved.
func readMeta(dir string) (*Image, error) {
	b, err := os.ReadFile(filepath.Join(dir, "image.json"))
	if err != nil {
		return nil, err
	}
	var img Image
	if err := json.Unmarshal(b, &img); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "image.json"), err)
	}
	img.Rootfs = filepath.Join(dir, "rootfs")
	return &img, nil
}
