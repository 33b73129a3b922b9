// Package sandbox runs the commands of an evaluation (agents, their
// terminal commands, executable graders) confined: a Runner wraps a command
// line so that it runs inside the sandbox with its working directory and
// the paths it may write bound in.
//
// Two backends: None runs commands as they are; Bwrap runs each under
// bubblewrap. An agent is untrusted code, so the bubblewrap sandbox shows
// it the host's system read-only and nothing of its users: home
// directories, the host's sockets and credential stores are hidden (empty),
// and only what the command needs to start (its program, interpreter and
// install directory, found from the command line) is bound back,
// read-only. It gets a private /tmp, a fresh empty HOME, new /proc and
// /dev, its own PID namespace (every process it starts dies with it) and,
// with network "none", no network. The run's own files (outputs, graders,
// prompts) are bound read-only over any writable directory that holds
// them.
package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	"harness/internal/treecopy"
	"harness/sandbox/egress"
	"harness/sandbox/limits"
)

// Command is one command to run.
type Command struct {
	// Argv is the command line; Argv[0] is looked up on PATH.
	Argv []string
	// Dir is the working directory. It is not writable unless RW names it.
	Dir string
	// Env is the environment the caller would give the command.
	Env []string
	// RW lists the directories the command may write.
	RW []string
	// RO lists more paths the command may read.
	RO []string
	// Disk lists the directories the disk cap covers (a workspace copy;
	// never a directory of the user's), beyond the sandbox's HOME.
	Disk []string
	// SetEnv are KEY=VALUE variables set as given, over Env and the
	// sandbox's own (such as a cache directory bound in).
	SetEnv []string
}

// Wrapped is a command ready to exec, and what to do once it has ended.
type Wrapped struct {
	Argv []string
	Dir  string
	Env  []string
	// Cleanup removes what the sandbox made for the command (its HOME,
	// its cgroups); call it once the command has ended.
	Cleanup func()
	// Started, when not nil, is to be called with the command's pid as
	// soon as it has started: the caps' watcher begins.
	Started func(pid int)
	// LimitHit, when not nil, names the resource cap the command hit, with
	// its flag ("" for none); the sandbox was ended when it did.
	LimitHit func() string
	// Connections, when not nil, returns the network connections the
	// command made through the allowlist proxy since the last call: those
	// that ended, and those still open with their bytes so far.
	Connections func() []egress.Connection
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
	// Network is "host", "none" or "allow" ("" for backend none).
	Network string `json:"network,omitempty"`
	// Allow is the egress allowlist of network "allow".
	Allow []string `json:"allow,omitempty"`
	// Version is the backend's version, when it has one.
	Version string `json:"version,omitempty"`
	// Hidden are the host paths the sandbox shows empty.
	Hidden []string `json:"hidden,omitempty"`
	// Bound are the hidden paths bound back read-only (what the commands
	// need to start, and --sandbox-ro).
	Bound []string `json:"bound,omitempty"`
	// Protected are the run's own files, read-only inside the sandbox
	// even where their directory is writable.
	Protected []string `json:"protected,omitempty"`
	// Caps say how each resource cap is enforced.
	Caps []limits.Applied `json:"caps,omitempty"`
}

// None runs commands as they are.
type None struct{}

// Wrap returns c unchanged.
func (None) Wrap(c Command) (Wrapped, error) {
	return Wrapped{Argv: c.Argv, Dir: c.Dir, Env: setEnv(c.Env, c.SetEnv), Cleanup: func() {}}, nil
}

// setEnv returns env with the variables of set added, replacing any of
// the same name.
func setEnv(env, set []string) []string {
	if len(set) == 0 {
		return env
	}
	names := map[string]bool{}
	for _, kv := range set {
		k, _, _ := strings.Cut(kv, "=")
		names[k] = true
	}
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !names[k] {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}

// Info says there is no sandbox.
func (None) Info() Info { return Info{Backend: "none"} }

// Options configure a bubblewrap sandbox.
type Options struct {
	// Network is "allow" (a network namespace of its own whose only way
	// out is a proxy harness runs, letting through the hosts of Allow),
	// "none" (loopback only) or "host" (the host's network); "" means
	// allow when Allow is set, else host.
	Network string
	// Allow is the egress allowlist of network "allow".
	Allow []egress.Rule
	// RO and RW are extra paths bound read-only and read-write.
	RO, RW []string
	// Hide are more host paths to show empty, beyond DefaultHidden.
	Hide []string
	// Home is the home directory of the user running harness, hidden like
	// every other ("" = $HOME).
	Home string
	// Protect are the run's own files and directories (outputs, graders,
	// prompts, prices): bound read-only over any writable bind that holds
	// them. Paths that do not exist when a command starts are skipped.
	// More can be added with (*Bwrap).Protect.
	Protect []string
	// Secrets are files and directories hidden last, over every bind
	// (an install directory bound back may hold them), such as the key
	// harness signs its records with.
	Secrets []string
	// HomeTemplate, when set, is copied into each fresh HOME (agent
	// configuration such as ~/.claude or ~/.codex).
	HomeTemplate string
	// TmpDir is where the HOME directories are made ("" = the system
	// temp dir).
	TmpDir string
	// KeepEnv names more variables passed into the sandbox (beyond PATH,
	// locale, TERM, TZ and the model providers' variables).
	KeepEnv []string
	// Path is the bwrap binary ("" = bwrap on PATH).
	Path string
	// Caps, when not nil, caps the resources of each command and all it
	// starts (see package limits).
	Caps *limits.Caps
	// CgroupParent is a delegated cgroup v2 directory for the caps ("" =
	// found from this process's own cgroup).
	CgroupParent string
	// Exe is the harness executable the network bridge runs inside the
	// sandbox ("" = this process's own executable).
	Exe string
}

// DefaultHidden are the host paths a sandboxed command sees empty: home
// directories, the host's runtime sockets (docker, podman, dbus, ssh-agent
// live under /run), and stores of credentials and logs. Files are
// replaced by an empty file, directories by an empty directory.
var defaultHidden = []string{
	"/root", "/home", "/run", "/var/run", "/var/tmp", "/var/log", "/var/mail", "/var/spool", "/var/backups",
	"/var/lib/docker", "/var/lib/containers", "/var/lib/munge", "/var/lib/sss", "/var/lib/systemd", "/var/lib/private",
	"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/ssh", "/etc/munge", "/etc/sudoers", "/etc/sudoers.d",
	"/etc/security/opasswd", "/etc/krb5.keytab",
}

// DefaultHidden returns the host paths every bubblewrap sandbox hides.
func DefaultHidden() []string { return slices.Clone(defaultHidden) }

// Bwrap runs commands under bubblewrap.
type Bwrap struct {
	opts    Options
	path    string
	version string
	hidden  []string // absolute, existing, cleaned

	proxy    *egress.Proxy    // network "allow": the only way out
	applied  []limits.Applied // how the caps are enforced
	warnings []string         // caps that could not be applied as asked

	mu        sync.Mutex
	protect   []string
	bound     map[string]bool // hidden paths bound back, for Info
	protected map[string]bool // protected paths bound, for Info
}

// NewBwrap checks that bubblewrap is installed and works here, and that
// the extra paths exist, and returns the sandbox. Its errors say what to
// do.
func NewBwrap(opts Options) (*Bwrap, error) {
	switch opts.Network {
	case "":
		opts.Network = "host"
		if len(opts.Allow) > 0 {
			opts.Network = "allow"
		}
	case "host", "none", "allow":
	default:
		return nil, fmt.Errorf("sandbox network %q: want allow (with rules), none or host", opts.Network)
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
	if opts.Home == "" {
		opts.Home = os.Getenv("HOME")
	}
	b := &Bwrap{opts: opts, path: path, bound: map[string]bool{}, protected: map[string]bool{}}
	b.hidden = hiddenPaths(append(append(DefaultHidden(), opts.Home), opts.Hide...))
	b.Protect(opts.Protect...)
	out, err := exec.Command(path, "--version").Output()
	if err == nil {
		b.version = strings.TrimSpace(strings.TrimPrefix(string(out), "bubblewrap"))
	}
	if opts.Caps != nil {
		// A first group says how the caps can be enforced here; every
		// command's is made the same way.
		g, warnings, err := limits.New(*opts.Caps, limits.Options{CgroupParent: opts.CgroupParent, DiskDirs: []string{os.TempDir()}})
		if err != nil {
			return nil, fmt.Errorf("sandbox caps: %w", err)
		}
		b.applied, b.warnings = g.Applied(), warnings
		g.Close()
		for i, a := range b.applied {
			if a.Cap == limits.CapDisk && a.How == "watcher" {
				b.applied[i].Note = "the size of each workspace copy, its private /tmp and HOME, polled"
			}
		}
	}
	if opts.Network == "allow" {
		exe := opts.Exe
		if exe == "" {
			if exe, err = os.Executable(); err != nil {
				return nil, fmt.Errorf("sandbox network: the harness executable: %w", err)
			}
		}
		b.proxy = egress.NewProxy(opts.Allow, opts.TmpDir)
		b.proxy.Executable = exe
		if !slices.Contains(b.hidden, "/run") {
			b.hidden = append(b.hidden, "/run") // the proxy's socket is bound under it
		}
	}
	// A trial run says whether namespaces can be made here.
	probe := exec.Command(path, b.args(Command{Dir: "/"}, wrapPlan{home: "/"})...)
	probe.Args = append(probe.Args, "true")
	if msg, err := probe.CombinedOutput(); err != nil {
		text := strings.TrimSpace(string(msg))
		hint := ""
		if strings.Contains(text, "namespace") || strings.Contains(text, "Operation not permitted") || strings.Contains(text, "setting up uid map") {
			hint = "; unprivileged user namespaces look disabled: enable them with sysctl kernel.unprivileged_userns_clone=1 (Debian) or sysctl user.max_user_namespaces=15000, or on Ubuntu 24.04 and later allow bwrap in AppArmor (kernel.apparmor_restrict_unprivileged_userns=0)"
		}
		return nil, fmt.Errorf("bubblewrap cannot make a sandbox here: %s%s", text, hint)
	}
	if b.proxy != nil {
		// Connections that ignore the proxy variables go to the proxy
		// too where the kernel can redirect them; elsewhere they fail
		// in the sandbox, off the record, as said once per run.
		if err := b.proxy.ProbeRedirect(path); err != nil {
			b.warnings = append(b.warnings, fmt.Sprintf("the sandbox cannot redirect the connections that ignore the proxy variables here (%v): they fail inside the sandbox and are not on the record", err))
		} else {
			b.proxy.Redirect = true
		}
	}
	return b, nil
}

// hiddenPaths keeps the paths that exist and are not symbolic links (a
// link such as /var/run -> /run is hidden with its target), absolute and
// cleaned, without duplicates, outermost first.
func hiddenPaths(paths []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		if p == "" || !filepath.IsAbs(p) {
			continue
		}
		p = filepath.Clean(p)
		if p == "/" || seen[p] {
			continue
		}
		st, err := os.Lstat(p)
		if err != nil || st.Mode()&os.ModeSymlink != 0 {
			continue
		}
		seen[p] = true
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) < len(out[j]) || len(out[i]) == len(out[j]) && out[i] < out[j] })
	// A path under another hidden one needs nothing of its own.
	var kept []string
	for _, p := range out {
		if !slices.ContainsFunc(kept, func(k string) bool { return within(p, k) }) {
			kept = append(kept, p)
		}
	}
	return kept
}

// Protect adds paths to keep read-only inside the sandbox (see
// Options.Protect); it is safe to call while commands start.
func (b *Bwrap) Protect(paths ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range paths {
		if p == "" || p == "-" {
			continue
		}
		if a, err := filepath.Abs(p); err == nil && !slices.Contains(b.protect, a) {
			b.protect = append(b.protect, a)
		}
	}
}

// Warnings say which caps could not be enforced as asked, and how they
// are instead, and whether connections that ignore the proxy variables
// could not be redirected to the proxy: to be shown once per run.
func (b *Bwrap) Warnings() []string { return slices.Clone(b.warnings) }

// Info says how commands run.
func (b *Bwrap) Info() Info {
	b.mu.Lock()
	defer b.mu.Unlock()
	info := Info{Backend: "bwrap", Network: b.opts.Network, Version: b.version, Hidden: slices.Clone(b.hidden),
		Caps: slices.Clone(b.applied)}
	if b.proxy != nil {
		for _, r := range b.proxy.Rules() {
			info.Allow = append(info.Allow, r.String())
		}
	}
	for p := range b.bound {
		info.Bound = append(info.Bound, p)
	}
	for p := range b.protected {
		info.Protected = append(info.Protected, p)
	}
	sort.Strings(info.Bound)
	sort.Strings(info.Protected)
	return info
}

// Args returns the bubblewrap arguments (before the command) for c with
// the given HOME, for documentation and tests.
func (b *Bwrap) Args(c Command, home string) []string { return b.args(c, wrapPlan{home: home}) }

// wrapPlan is what one command's bwrap arguments are made of, beyond the
// sandbox's own.
type wrapPlan struct {
	home    string   // the fresh HOME
	back    []string // hidden paths bound back read-only
	tmps    []string // entries of the host's /tmp the command line names
	tmpSize []string // --size of the private /tmp
	extra   []string // the network session's arguments
}

// within says whether path p is dir or lies under it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

func (b *Bwrap) args(c Command, p wrapPlan) []string {
	home, back, tmps, tmpSize := p.home, p.back, p.tmps, p.tmpSize
	a := []string{
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--proc", "/proc",
	}
	a = append(append(a, tmpSize...), "--tmpfs", "/tmp")
	for _, t := range tmps {
		a = append(a, "--ro-bind", t, t)
	}
	// Hidden paths go over everything bound so far, so a hidden home
	// under /tmp stays hidden; what is bound back comes after.
	for _, h := range b.hidden {
		if st, err := os.Stat(h); err == nil && st.IsDir() {
			a = append(a, "--tmpfs", h)
		} else {
			a = append(a, "--ro-bind", "/dev/null", h)
		}
	}
	a = append(a,
		"--unshare-pid",
		"--unshare-ipc",
		"--unshare-uts",
		"--die-with-parent",
		"--new-session",
		// Run as root, bwrap would leave the command every capability
		// (it could remount the host's / writable); none is kept.
		"--cap-drop", "ALL",
	)
	if b.opts.Network == "none" {
		a = append(a, "--unshare-net")
	}
	ro := append(append(append([]string{}, back...), b.opts.RO...), c.RO...)
	for _, r := range ro {
		a = append(a, "--ro-bind", abs(r), abs(r))
	}
	rw := append(append([]string{}, b.opts.RW...), c.RW...)
	for _, w := range rw {
		a = append(a, "--bind", abs(w), abs(w))
	}
	if home != "/" {
		a = append(a, "--bind", home, home)
	}
	// The run's own files stay read-only, last, over any writable bind.
	b.mu.Lock()
	protect := slices.Clone(b.protect)
	b.mu.Unlock()
	for _, f := range protect {
		if _, err := os.Lstat(f); err != nil {
			continue
		}
		b.mu.Lock()
		b.protected[f] = true
		b.mu.Unlock()
		if b.exposedWritable(f, rw) {
			a = append(a, "--ro-bind", f, f)
		}
	}
	for _, f := range b.opts.Secrets {
		if st, err := os.Stat(f); err == nil && st.IsDir() {
			a = append(a, "--tmpfs", f)
		} else if err == nil {
			a = append(a, "--ro-bind", "/dev/null", f)
		}
	}
	a = append(a, p.extra...)
	if c.Dir != "" {
		a = append(a, "--chdir", c.Dir)
	}
	return append(a, "--")
}

// exposedWritable says whether protected path p exists and lies inside a
// writable bind, and is not itself a writable directory's ancestor (the
// command's own directory is never made read-only; its files are
// protected one by one).
func (b *Bwrap) exposedWritable(p string, rw []string) bool {
	if _, err := os.Lstat(p); err != nil {
		return false
	}
	inside := false
	for _, r := range rw {
		r = abs(r)
		if within(r, p) {
			return false
		}
		if within(p, r) {
			inside = true
		}
	}
	return inside
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
		if err := treecopy.Copy(b.opts.HomeTemplate, home, treecopy.Options{}); err != nil {
			cleanup()
			return Wrapped{}, fmt.Errorf("sandbox home from %s: %w", b.opts.HomeTemplate, err)
		}
	}
	argv := slices.Clone(c.Argv)
	if p, err := lookPath(argv[0], c.Env); err == nil {
		argv[0] = p
	}
	// Arguments naming a file or directory of the user's (relative to
	// harness's own directory) are made absolute: the command starts in
	// its own directory, not the user's.
	for i, arg := range argv[1:] {
		if arg != "" && !filepath.IsAbs(arg) && !strings.HasPrefix(arg, "-") {
			if _, err := os.Stat(arg); err == nil {
				argv[i+1] = abs(arg)
			}
		}
	}
	back := b.needed(argv, c.Env)
	// /tmp is private in the sandbox: the program and what its arguments
	// name there (a script and the packages beside it) are bound in,
	// read-only, by their top directory under /tmp.
	var tmps []string
	for _, a := range argv {
		if top := tmpTop(a); top != "" && !slices.Contains(tmps, top) {
			if _, err := os.Stat(top); err == nil {
				tmps = append(tmps, top)
			}
		}
	}
	w := Wrapped{Dir: c.Dir, Env: setEnv(b.env(c.Env, home), c.SetEnv), Cleanup: cleanup}
	var prefix, tmpSize []string
	if b.opts.Caps != nil {
		g, _, err := limits.New(*b.opts.Caps, limits.Options{CgroupParent: b.opts.CgroupParent, DiskDirs: append(slices.Clone(c.Disk), home)})
		if err != nil {
			cleanup()
			return Wrapped{}, fmt.Errorf("sandbox caps: %w", err)
		}
		prefix, tmpSize = g.WrapperArgs(), g.TmpfsSizeArgs()
		w.Cleanup = func() { g.Close(); cleanup() }
		w.Started = func(pid int) {
			g.Start(pid, func() { syscall.Kill(-pid, syscall.SIGKILL) })
		}
		w.LimitHit = g.Check
	}
	plan := wrapPlan{home: home, back: back, tmps: tmps, tmpSize: tmpSize}
	if b.proxy != nil {
		// The only way out: the allowlist proxy, through the bridge.
		log := &netLog{shown: map[uint64]bool{}}
		sess, err := b.proxy.NewSession(log.add)
		if err != nil {
			w.Cleanup()
			return Wrapped{}, fmt.Errorf("sandbox network: %w", err)
		}
		log.sess = sess
		plan.extra = sess.BwrapArgs
		argv = sess.Command(argv)
		w.Env = append(w.Env, sess.Env...)
		inner := w.Cleanup
		w.Cleanup = func() { sess.Close(); inner() }
		w.Connections = log.take
	}
	w.Argv = append(append(prefix, b.path), b.args(c, plan)...)
	w.Argv = append(w.Argv, argv...)
	return w, nil
}

// netLog keeps a sandboxed command's connections until they are taken.
type netLog struct {
	mu    sync.Mutex
	sess  *egress.Session
	ended []egress.Connection
	shown map[uint64]bool // taken while still open
}

func (l *netLog) add(c egress.Connection) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.ID != 0 && l.shown[c.ID] {
		return // given out while open, with its bytes so far
	}
	l.ended = append(l.ended, c)
}

// take returns the connections that ended since the last take, and those
// still open (once each, with their bytes so far), in accept order.
func (l *netLog) take() []egress.Connection {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.ended
	l.ended = nil
	if l.sess != nil {
		for _, c := range l.sess.Open() {
			if !l.shown[c.ID] {
				l.shown[c.ID] = true
				out = append(out, c)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// needed finds what a command needs to start that the sandbox hides: its
// program (and where its link points), the interpreter its #! line names
// (through env), and the files its arguments name. Each is bound back
// read-only by its install directory: under a home directory, the entry
// of the home it lies in (~/.nvm, ~/.local, ~/.bun); elsewhere, its
// directory.
func (b *Bwrap) needed(argv, env []string) []string {
	var paths []string
	add := func(p string) {
		if p == "" || !filepath.IsAbs(p) {
			return
		}
		paths = append(paths, p)
		if real, err := filepath.EvalSymlinks(p); err == nil && real != p {
			paths = append(paths, real)
		}
	}
	add(argv[0])
	if interp := interpreter(argv[0]); len(interp) > 0 {
		add(interp[0])
		if filepath.Base(interp[0]) == "env" {
			for _, w := range interp[1:] {
				if strings.HasPrefix(w, "-") || strings.Contains(w, "=") {
					continue
				}
				if p, err := lookPath(w, env); err == nil {
					add(p)
				}
				break
			}
		}
	}
	for _, a := range argv[1:] {
		if filepath.IsAbs(a) {
			if _, err := os.Stat(a); err == nil {
				add(a)
			}
		}
	}
	var out []string
	for _, p := range paths {
		h := b.hiddenHolding(p)
		if h == "" {
			continue
		}
		dir := installDir(p, h, b.homes())
		if !slices.Contains(out, dir) {
			out = append(out, dir)
		}
	}
	b.mu.Lock()
	for _, d := range out {
		b.bound[d] = true
	}
	b.mu.Unlock()
	return out
}

// hiddenHolding returns the hidden path p lies under, or "".
func (b *Bwrap) hiddenHolding(p string) string {
	for _, h := range b.hidden {
		if within(p, h) {
			return h
		}
	}
	return ""
}

// homes are the directories whose entries are install directories.
func (b *Bwrap) homes() []string {
	homes := []string{"/root"}
	if b.opts.Home != "" {
		homes = append(homes, filepath.Clean(b.opts.Home))
	}
	if ents, err := os.ReadDir("/home"); err == nil {
		for _, e := range ents {
			homes = append(homes, "/home/"+e.Name())
		}
	}
	return homes
}

// installDir is what to bind back for path p, hidden under h: the entry of
// a home directory that holds it, or its directory.
func installDir(p, h string, homes []string) string {
	for _, home := range homes {
		if rest, ok := strings.CutPrefix(p, home+"/"); ok {
			first, _, more := strings.Cut(rest, "/")
			if !more {
				return p // a file right in the home directory
			}
			return filepath.Join(home, first)
		}
	}
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		return p
	}
	if d := filepath.Dir(p); within(d, h) {
		return d
	}
	return p
}

// interpreter reads the #! line of an executable script.
func interpreter(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	buf := make([]byte, 256)
	n, _ := io.ReadFull(f, buf)
	line, _, _ := bytes.Cut(buf[:n], []byte("\n"))
	rest, ok := bytes.CutPrefix(line, []byte("#!"))
	if !ok {
		return nil
	}
	return strings.Fields(string(rest))
}

// env keeps what a command needs and nothing else of the harness's own
// environment: PATH, locale, TERM, TZ, the model providers' variables
// (an agent needs its API key and endpoint), the ones named in KeepEnv
// (the agent's --env and --secret-env), harness's own (the process
// token), and HOME set
// to the sandbox's. Other credentials (GITHUB_TOKEN, AWS_*, NPM_TOKEN...)
// stay out unless named.
func (b *Bwrap) env(env []string, home string) []string {
	keep := map[string]bool{"PATH": true, "LANG": true, "LANGUAGE": true, "TERM": true, "TZ": true}
	for _, k := range b.opts.KeepEnv {
		keep[k] = true
	}
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if keep[k] || strings.HasPrefix(k, "LC_") || strings.HasPrefix(k, "HARNESS_") || modelVar(k) {
			out = append(out, kv)
		}
	}
	return append(out, "HOME="+home, "TMPDIR=/tmp")
}

// modelPrefixes name the variables of model providers and of the agents
// that call them.
var modelPrefixes = []string{"ANTHROPIC_", "CLAUDE_", "OPENAI_", "CODEX_", "GEMINI_", "GOOGLE_GENAI_", "GOOGLE_GEMINI_",
	"GOOGLE_CLOUD_PROJECT", "GOOGLE_API_KEY", "VERTEX_", "OPENROUTER_", "MISTRAL_", "DEEPSEEK_", "GROQ_", "XAI_",
	"AZURE_OPENAI_", "OLLAMA_"}

// modelVar says whether k names a model provider's or agent's variable.
func modelVar(k string) bool {
	for _, p := range modelPrefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
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
