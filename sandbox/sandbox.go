// Package sandbox runs the commands of an evaluation (agents, their
// terminal commands, executable graders) confined: a Runner wraps a command
// line so that it runs inside the sandbox with its working directory and
// the directories it may write bound in.
//
// Two backends: None runs commands as they are; Bwrap runs each under
// bubblewrap with the host filesystem read-only, the given directories
// read-write, a private /tmp, a fresh empty HOME, new /proc and /dev, its
// own PID namespace (so every process it starts dies with it) and, with
// network "none", no network.
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"harness/internal/redact"
)

// Command is one command to run.
type Command struct {
	// Argv is the command line; Argv[0] is looked up on PATH.
	Argv []string
	// Dir is the working directory; it is bound read-write.
	Dir string
	// Env is the environment the caller would give the command.
	Env []string
	// RW lists more directories the command may write.
	RW []string
	// RO lists more paths the command may read (the host is readable
	// anyway, but for the private /tmp).
	RO []string
}

// Wrapped is a command ready to exec, and what to do once it has ended.
type Wrapped struct {
	Argv []string
	Dir  string
	Env  []string
	// Cleanup removes what the sandbox made for the command (its HOME);
	// call it once the command and every process it started are gone.
	Cleanup func()
}

// Runner wraps commands to run in a sandbox.
type Runner interface {
	// Wrap returns the command line that runs c in the sandbox.
	Wrap(c Command) (Wrapped, error)
	// Info says how commands run, for records.
	Info() Info
}

// Info describes a sandbox, for a record's provenance.
type Info struct {
	// Backend is "none" or "bwrap".
	Backend string `json:"backend"`
	// Network is "host" or "none" ("" for backend none).
	Network string `json:"network,omitempty"`
	// Version is the backend's version, when it has one.
	Version string `json:"version,omitempty"`
}

// None runs commands as they are.
type None struct{}

// Wrap returns c unchanged.
func (None) Wrap(c Command) (Wrapped, error) {
	return Wrapped{Argv: c.Argv, Dir: c.Dir, Env: c.Env, Cleanup: func() {}}, nil
}

// Info says there is no sandbox.
func (None) Info() Info { return Info{Backend: "none"} }

// Options configure a bubblewrap sandbox.
type Options struct {
	// Network is "host" (the default: agents must reach their model) or
	// "none" (a network namespace of its own, with loopback only).
	Network string
	// RO and RW are extra paths bound read-only and read-write.
	RO, RW []string
	// HomeTemplate, when set, is copied into each fresh HOME (agent
	// configuration such as ~/.claude or ~/.codex).
	HomeTemplate string
	// TmpDir is where the HOME directories are made ("" = the system
	// temp dir).
	TmpDir string
	// KeepEnv names more variables passed into the sandbox (beyond PATH,
	// locale, TERM, TZ, variables named like credentials, and the ones
	// the command sets itself).
	KeepEnv []string
	// Path is the bwrap binary ("" = bwrap on PATH).
	Path string
}

// Bwrap runs commands under bubblewrap.
type Bwrap struct {
	opts    Options
	path    string
	version string
}

// NewBwrap checks that bubblewrap is installed and works here, and that
// the extra paths exist, and returns the sandbox. Its errors say what to
// do.
func NewBwrap(opts Options) (*Bwrap, error) {
	switch opts.Network {
	case "":
		opts.Network = "host"
	case "host", "none":
	default:
		return nil, fmt.Errorf("sandbox network %q: want host or none", opts.Network)
	}
	path := opts.Path
	if path == "" {
		p, err := exec.LookPath("bwrap")
		if err != nil {
			return nil, errors.New("bubblewrap (bwrap) is not installed: install the package bubblewrap (Debian, Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)")
		}
		path = p
	}
	for _, p := range append(append([]string{}, opts.RO...), opts.RW...) {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("sandbox bind %s: %w", p, err)
		}
	}
	if opts.HomeTemplate != "" {
		if st, err := os.Stat(opts.HomeTemplate); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("sandbox home template %s: not a directory", opts.HomeTemplate)
		}
	}
	b := &Bwrap{opts: opts, path: path}
	out, err := exec.Command(path, "--version").Output()
	if err == nil {
		b.version = strings.TrimSpace(strings.TrimPrefix(string(out), "bubblewrap"))
	}
	// A trial run says whether namespaces can be made here.
	probe := exec.Command(path, b.args(Command{Dir: "/"}, "/")...)
	probe.Args = append(probe.Args, "true")
	if msg, err := probe.CombinedOutput(); err != nil {
		text := strings.TrimSpace(string(msg))
		hint := ""
		if strings.Contains(text, "namespace") || strings.Contains(text, "Operation not permitted") || strings.Contains(text, "setting up uid map") {
			hint = "; unprivileged user namespaces look disabled: enable them with sysctl kernel.unprivileged_userns_clone=1 (Debian) or sysctl user.max_user_namespaces=15000, or on Ubuntu 24.04 and later allow bwrap in AppArmor (kernel.apparmor_restrict_unprivileged_userns=0)"
		}
		return nil, fmt.Errorf("bubblewrap cannot make a sandbox here: %s%s", text, hint)
	}
	return b, nil
}

// Info says how commands run.
func (b *Bwrap) Info() Info {
	return Info{Backend: "bwrap", Network: b.opts.Network, Version: b.version}
}

// Args returns the bubblewrap arguments (before the command) for c with
// the given HOME, for documentation and tests.
func (b *Bwrap) Args(c Command, home string) []string { return b.args(c, home) }

func (b *Bwrap) args(c Command, home string) []string {
	a := []string{
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--proc", "/proc",
		"--tmpfs", "/tmp",
		"--unshare-pid",
		"--unshare-ipc",
		"--unshare-uts",
		"--die-with-parent",
		"--new-session",
	}
	if b.opts.Network == "none" {
		a = append(a, "--unshare-net")
	}
	for _, p := range append(append([]string{}, b.opts.RO...), c.RO...) {
		a = append(a, "--ro-bind", abs(p), abs(p))
	}
	rw := append([]string{}, b.opts.RW...)
	if c.Dir != "" && c.Dir != "/" {
		rw = append(rw, c.Dir)
	}
	rw = append(rw, c.RW...)
	for _, p := range rw {
		a = append(a, "--bind", abs(p), abs(p))
	}
	if home != "/" {
		a = append(a, "--bind", home, home)
	}
	if c.Dir != "" {
		a = append(a, "--chdir", c.Dir)
	}
	return append(a, "--")
}

func abs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// Wrap returns the bwrap command line that runs c with a fresh HOME.
func (b *Bwrap) Wrap(c Command) (Wrapped, error) {
	if len(c.Argv) == 0 {
		return Wrapped{}, errors.New("sandbox: empty command")
	}
	home, err := os.MkdirTemp(b.opts.TmpDir, "harness-home-")
	if err != nil {
		return Wrapped{}, fmt.Errorf("sandbox home: %w", err)
	}
	cleanup := func() { os.RemoveAll(home) }
	if b.opts.HomeTemplate != "" {
		if err := copyDir(b.opts.HomeTemplate, home); err != nil {
			cleanup()
			return Wrapped{}, fmt.Errorf("sandbox home from %s: %w", b.opts.HomeTemplate, err)
		}
	}
	argv0 := c.Argv[0]
	if p, err := lookPath(argv0, c.Env); err == nil {
		argv0 = p
	}
	// /tmp is private in the sandbox: the program and what its arguments
	// name there (a script and the packages beside it) are bound in,
	// read-only, by their top directory under /tmp.
	for _, a := range append([]string{argv0}, c.Argv[1:]...) {
		if top := tmpTop(a); top != "" {
			if _, err := os.Stat(top); err == nil {
				c.RO = append(c.RO, top)
			}
		}
	}
	argv := append([]string{b.path}, b.args(c, home)...)
	argv = append(argv, argv0)
	argv = append(argv, c.Argv[1:]...)
	return Wrapped{Argv: argv, Dir: c.Dir, Env: b.env(c.Env, home), Cleanup: cleanup}, nil
}

// env keeps what a command needs and nothing else of the harness's own
// environment: PATH, locale, TERM, TZ, variables named like credentials
// (an agent needs its API key), the ones named in KeepEnv, and HOME set to
// the sandbox's.
func (b *Bwrap) env(env []string, home string) []string {
	keep := map[string]bool{"PATH": true, "LANG": true, "LANGUAGE": true, "TERM": true, "TZ": true}
	for _, k := range b.opts.KeepEnv {
		keep[k] = true
	}
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if keep[k] || strings.HasPrefix(k, "LC_") || strings.HasPrefix(k, "HARNESS_") || redact.IsSecretName(k) {
			out = append(out, kv)
		}
	}
	return append(out, "HOME="+home, "TMPDIR=/tmp")
}

// lookPath finds argv0 on the PATH of env (the sandbox's), falling back to
// the harness's own.
func lookPath(argv0 string, env []string) (string, error) {
	if strings.Contains(argv0, "/") {
		return filepath.Abs(argv0)
	}
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, dir := range filepath.SplitList(p) {
				cand := filepath.Join(dir, argv0)
				if st, err := os.Stat(cand); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
					return cand, nil
				}
			}
		}
	}
	return exec.LookPath(argv0)
}

// copyDir copies a directory tree (files, directories, symlinks).
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if rel == "." {
				return nil
			}
			return os.Mkdir(target, info.Mode().Perm()|0o700)
		case d.Type()&os.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, info.Mode().Perm())
		}
		return nil
	})
}

// tmpTop returns the entry of /tmp that path p lies in ("/tmp/x" for
// "/tmp/x/y/z"), or "" when p is not under /tmp.
func tmpTop(p string) string {
	if !filepath.IsAbs(p) {
		return ""
	}
	rest, ok := strings.CutPrefix(filepath.Clean(p), "/tmp/")
	if !ok || rest == "" {
		return ""
	}
	first, _, _ := strings.Cut(rest, "/")
	return "/tmp/" + first
}
