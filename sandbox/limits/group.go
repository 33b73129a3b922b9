package limits

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options say where a Group may make its cgroups and what disk it
// watches.
type Options struct {
	// CgroupParent is a cgroup v2 directory, with the controllers
	// delegated, under which each Group makes its own ("" = look for one:
	// this process's cgroup, then its parent). When set it must work.
	CgroupParent string
	// DiskDirs are the directories whose total size the disk cap covers
	// (the workspace, the sandbox's HOME).
	DiskDirs []string
	// NoCgroup makes no cgroup at all: rlimits and watchers only.
	NoCgroup bool
	// Interval is how often the watcher polls (0 = 100 ms).
	Interval time.Duration

	// host points the Group at fake kernel files in tests.
	host *host
}

// Applied says how one cap is enforced, for provenance.
type Applied struct {
	// Cap is "memory", "pids", "cpus" or "disk".
	Cap string `json:"cap"`
	// Value is the cap as people write it ("512 MiB", "1024", "1.5").
	Value string `json:"value"`
	// How is "cgroup v2", "cgroup v1", "rlimit", "watcher", "not applied"
	// or "no cap".
	How string `json:"how"`
	// Note says more when the enforcement is partial.
	Note string `json:"note,omitempty"`
}

// Group enforces the caps of one sandboxed command: the cgroups it made,
// the rlimits its wrapper sets, and the watcher that ends the command
// when a cap is hit.
type Group struct {
	caps       Caps
	h          host
	interval   time.Duration
	diskDirs   []string
	dirs       []cgroupDir
	applied    []Applied
	rlimitData int64
	watchMem   bool
	watchPids  bool

	mu       sync.Mutex
	hitCap   string
	root     procInfo
	kill     func()
	stop     chan struct{}
	done     chan struct{}
	closed   bool
	closeErr error

	nextDisk time.Time
}

// rlimitSlack is how far over the memory cap a single process may grow
// under the rlimit fallback before its allocations fail: the watcher
// ends the command at the cap itself; the rlimit stops one process that
// allocates faster than the watcher polls. The slack is generous because
// runtimes map writable memory they never touch (a Go program starts with
// some 70 MiB of data mappings and 4 MiB resident).
func rlimitSlack(memory int64) int64 {
	s := memory / 4
	if s < 256<<20 {
		s = 256 << 20
	}
	return s
}

// New prepares the caps for one command: it makes its cgroups (removed
// by Close) and says how each cap is applied. The warnings name each cap
// that could not be applied or only weakly, with the reason; they depend
// only on the host and the caps, so a caller making one Group per case
// shows the first Group's warnings once and drops the same later ones.
func New(c Caps, opts Options) (*Group, []string, error) {
	if c.MemoryBytes < 0 || c.Pids < 0 || c.CPUs < 0 || c.DiskBytes < 0 {
		return nil, nil, fmt.Errorf("sandbox caps %+v: negative", c)
	}
	if opts.NoCgroup && opts.CgroupParent != "" {
		return nil, nil, errors.New("sandbox cgroup: a cgroup parent was given and cgroups are turned off")
	}
	g := &Group{caps: c, h: realHost(), interval: opts.Interval, diskDirs: opts.DiskDirs}
	if opts.host != nil {
		g.h = *opts.host
	}
	if g.interval <= 0 {
		g.interval = 100 * time.Millisecond
	}
	var need []string
	if c.MemoryBytes > 0 {
		need = append(need, "memory")
	}
	if c.Pids > 0 {
		need = append(need, "pids")
	}
	if c.CPUs > 0 {
		need = append(need, "cpu")
	}
	how := map[string]string{}
	if !opts.NoCgroup {
		if err := g.makeCgroups(need, opts.CgroupParent, how); err != nil {
			g.Close()
			return nil, nil, err
		}
	}
	var warnings []string
	add := func(a Applied, warn string) {
		g.applied = append(g.applied, a)
		if warn != "" {
			warnings = append(warnings, warn)
		}
	}
	why := func(ctl string) string {
		if opts.NoCgroup {
			return "cgroups are turned off"
		}
		parent := "name it as the cgroup parent"
		if n := c.Names.CgroupParent; n != "" {
			parent = "name it with " + n
		}
		return "no cgroup with the " + ctl + " controller can be made here (delegate cgroup v2 controllers to a directory harness can write, as systemd does under user@.service, and " + parent + "; or run where a cgroup v1 " + ctl + " hierarchy is writable)"
	}
	if c.MemoryBytes > 0 {
		a := Applied{Cap: CapMemory, Value: FormatSize(c.MemoryBytes), How: how["memory"]}
		warn := ""
		if a.How == "" {
			g.rlimitData = c.MemoryBytes + rlimitSlack(c.MemoryBytes)
			g.watchMem = true
			a.How = "rlimit"
			a.Note = fmt.Sprintf("each process's data (RLIMIT_DATA) is capped at %s; the total resident memory is checked every %s", FormatSize(g.rlimitData), g.interval)
			warn = fmt.Sprintf("the memory cap of %s%s is only approximated: %s; %s", a.Value, setBy(c.Names.Memory), why("memory"), a.Note)
		}
		add(a, warn)
	} else {
		add(Applied{Cap: CapMemory, Value: "0", How: "no cap"}, "")
	}
	if c.Pids > 0 {
		a := Applied{Cap: CapPids, Value: strconv.Itoa(c.Pids), How: how["pids"]}
		warn := ""
		if a.How == "" {
			g.watchPids = true
			a.How = "watcher"
			a.Note = fmt.Sprintf("tasks are counted every %s, so a fast fork bomb may go past the cap before it is killed (RLIMIT_NPROC counts all of a user's processes and is not enforced for root)", g.interval)
			warn = fmt.Sprintf("the pids cap of %s%s is only approximated: %s; %s", a.Value, setBy(c.Names.Pids), why("pids"), a.Note)
		}
		add(a, warn)
	} else {
		add(Applied{Cap: CapPids, Value: "0", How: "no cap"}, "")
	}
	if c.CPUs > 0 {
		a := Applied{Cap: CapCPUs, Value: strconv.FormatFloat(c.CPUs, 'f', -1, 64), How: how["cpu"]}
		warn := ""
		if a.How == "" {
			a.How = "not applied"
			a.Note = "no rlimit caps a rate of CPU use"
			warn = fmt.Sprintf("the cpus cap of %s%s is not applied: %s; the command may use every CPU", a.Value, setBy(c.Names.CPUs), why("cpu"))
		}
		add(a, warn)
	} else {
		add(Applied{Cap: CapCPUs, Value: "0", How: "no cap"}, "")
	}
	if c.DiskBytes > 0 {
		a := Applied{Cap: CapDisk, Value: FormatSize(c.DiskBytes), How: "watcher"}
		warn := ""
		if len(opts.DiskDirs) == 0 {
			a.How = "not applied"
			a.Note = "no directory to watch"
			warn = fmt.Sprintf("the disk cap of %s%s is not applied: no directory to watch", a.Value, setBy(c.Names.Disk))
		} else {
			a.Note = fmt.Sprintf("the size of %s is checked every %s, less often when walking it takes longer than a tenth of that", strings.Join(opts.DiskDirs, ", "), g.interval)
		}
		add(a, warn)
	} else {
		add(Applied{Cap: CapDisk, Value: "0", How: "no cap"}, "")
	}
	return g, warnings, nil
}

// makeCgroups makes the Group's cgroups: one v2 group for the
// controllers delegated to a writable directory, then one v1 group per
// controller left that has a writable hierarchy. how gets "cgroup v2" or
// "cgroup v1" per controller applied.
func (g *Group) makeCgroups(need []string, parent string, how map[string]string) error {
	mounts, err := g.h.mounts()
	if err != nil && parent != "" {
		return fmt.Errorf("sandbox cgroup %s: %w", parent, err)
	}
	own, err := g.h.ownPaths()
	if err != nil && parent != "" {
		return fmt.Errorf("sandbox cgroup %s: %w", parent, err)
	}
	var v2 *mount
	for i := range mounts {
		if mounts[i].v2 {
			v2 = &mounts[i]
			break
		}
	}
	if parent != "" {
		if v2 == nil {
			return fmt.Errorf("sandbox cgroup %s: no cgroup v2 filesystem is mounted", parent)
		}
		d, err := g.makeV2(*v2, own[""], parent, need)
		if err != nil {
			return fmt.Errorf("sandbox cgroup %s: %w", parent, err)
		}
		g.dirs = append(g.dirs, d)
	} else if v2 != nil {
		if ownDir := dirOf(*v2, own[""]); ownDir != "" {
			cands := []string{ownDir}
			if up := filepath.Dir(ownDir); ownDir != filepath.Clean(v2.dir) && strings.HasPrefix(up, filepath.Clean(v2.dir)) {
				cands = append(cands, up)
			}
			// The candidate that serves the most controllers wins; one
			// serving none still tracks the processes (and kills them).
			best := -1
			var made cgroupDir
			for _, p := range cands {
				d, err := g.makeV2(*v2, own[""], p, need)
				if err != nil {
					continue
				}
				if len(d.controllers) > best {
					if best >= 0 {
						_ = removeDirs([]cgroupDir{made}, time.Now())
					}
					best, made = len(d.controllers), d
				} else {
					_ = removeDirs([]cgroupDir{d}, time.Now())
				}
				if best == len(need) {
					break
				}
			}
			if best >= 0 {
				g.dirs = append(g.dirs, made)
			}
		}
	}
	for _, d := range g.dirs {
		for _, c := range d.controllers {
			how[c] = "cgroup v2"
		}
	}
	for _, ctl := range need {
		if how[ctl] != "" {
			continue
		}
		for _, m := range mounts {
			if m.v2 || !contains(m.opts, ctl) {
				continue
			}
			base := dirOf(m, own[ctl])
			if base == "" {
				continue
			}
			dir, err := os.MkdirTemp(base, "harness-sandbox-")
			if err != nil {
				continue
			}
			d := cgroupDir{path: dir, controllers: []string{ctl}}
			if err := v1Limit(dir, g.caps, ctl); err != nil || !writable(filepath.Join(dir, "cgroup.procs")) {
				_ = removeDirs([]cgroupDir{d}, time.Now())
				continue
			}
			g.dirs = append(g.dirs, d)
			how[ctl] = "cgroup v1"
			break
		}
	}
	return nil
}

// makeV2 makes a v2 group under parent with the controllers of need that
// parent delegates, and writes their caps.
func (g *Group) makeV2(m mount, ownPath, parent string, need []string) (cgroupDir, error) {
	avail, err := readWords(filepath.Join(parent, "cgroup.controllers"))
	if err != nil {
		return cgroupDir{}, fmt.Errorf("not a cgroup v2 directory: %w", err)
	}
	sub, _ := readWords(filepath.Join(parent, "cgroup.subtree_control"))
	var usable []string
	for _, ctl := range need {
		if !contains(avail, ctl) {
			continue
		}
		if !contains(sub, ctl) {
			// Fails (EBUSY) when the parent holds processes itself.
			if writeFile(filepath.Join(parent, "cgroup.subtree_control"), "+"+ctl) != nil {
				continue
			}
		}
		usable = append(usable, ctl)
	}
	// Moving a process needs write access to cgroup.procs of the common
	// ancestor of where it is and where it goes.
	if own := dirOf(m, ownPath); own != "" {
		anc := commonAncestor(own, filepath.Join(parent, "x"))
		if !writable(filepath.Join(anc, "cgroup.procs")) {
			return cgroupDir{}, fmt.Errorf("cannot move processes: %s is not writable", filepath.Join(anc, "cgroup.procs"))
		}
	}
	dir, err := os.MkdirTemp(parent, "harness-sandbox-")
	if err != nil {
		return cgroupDir{}, err
	}
	// The new group's files belong to whoever made it, so its
	// cgroup.procs is writable.
	d := cgroupDir{path: dir, v2: true}
	d.controllers = v2Limits(dir, g.caps, usable)
	return d, nil
}

// commonAncestor returns the deepest directory holding both paths.
func commonAncestor(a, b string) string {
	as := strings.Split(filepath.Clean(a), "/")
	bs := strings.Split(filepath.Clean(b), "/")
	n := 0
	for n < len(as) && n < len(bs) && as[n] == bs[n] {
		n++
	}
	if n <= 1 {
		return "/"
	}
	return strings.Join(as[:n], "/")
}

// Applied says how each cap is enforced, in the order memory, pids,
// cpus, disk.
func (g *Group) Applied() []Applied { return append([]Applied(nil), g.applied...) }

// Start begins watching the command started with pid (the wrapper's,
// which becomes bwrap's). On the first cap hit the watcher kills every
// process of the sandbox and calls kill (the caller's own way to end the
// command, such as killing its process group); kill runs on the
// watcher's goroutine and must not wait for Close. Start at most once.
func (g *Group) Start(pid int, kill func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || g.stop != nil {
		return
	}
	g.root, _ = readProc(g.h.proc, pid)
	g.root.pid = pid
	g.kill = kill
	g.stop, g.done = make(chan struct{}), make(chan struct{})
	go g.watch()
}

func (g *Group) watch() {
	defer close(g.done)
	t := time.NewTicker(g.interval)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
		}
		if g.check(false) {
			g.killEverything()
			return
		}
	}
}

// check polls the caps; it records the first hit and says whether there
// is one.
func (g *Group) check(final bool) bool {
	if g.Hit() != "" {
		return true
	}
	hit := ""
	for _, d := range g.dirs {
		if hit = d.hitIn(); hit != "" {
			break
		}
	}
	if hit == "" && !final && (g.watchMem || g.watchPids) {
		rss, tasks := g.usage()
		switch {
		case g.watchMem && rss > g.caps.MemoryBytes:
			hit = CapMemory
		case g.watchPids && tasks > g.caps.Pids:
			hit = CapPids
		}
	}
	if hit == "" && g.caps.DiskBytes > 0 && len(g.diskDirs) > 0 && (final || !time.Now().Before(g.nextDisk)) {
		start := time.Now()
		var size int64
		for _, d := range g.diskDirs {
			size += diskUsage(d)
		}
		// A big tree is walked less often: at most a tenth of the time
		// goes to walking it.
		wait := 10 * time.Since(start)
		if wait < g.interval {
			wait = g.interval
		}
		g.nextDisk = time.Now().Add(wait)
		if size > g.caps.DiskBytes {
			hit = CapDisk
		}
	}
	if hit == "" {
		return false
	}
	g.mu.Lock()
	if g.hitCap == "" {
		g.hitCap = hit
	}
	g.mu.Unlock()
	return true
}

// usage sums the resident memory and the tasks of the sandbox's
// processes.
func (g *Group) usage() (rss int64, tasks int) {
	for _, p := range g.members() {
		rss += p.rss
		tasks += p.threads
	}
	return rss, tasks
}

// members lists the sandbox's live processes: those in its cgroup when
// it has one, else the process tree under the started pid.
func (g *Group) members() []procInfo {
	if len(g.dirs) > 0 {
		var out []procInfo
		for _, pid := range g.dirs[0].procs() {
			if p, ok := readProc(g.h.proc, pid); ok && p.state != 'Z' {
				out = append(out, p)
			}
		}
		return out
	}
	if g.root.pid <= 0 {
		return nil
	}
	return processTree(g.h.proc, g.root)
}

// killEverything ends the sandbox: every process in its cgroups or its
// process tree, and the caller's kill.
func (g *Group) killEverything() {
	deadline := time.Now().Add(5 * time.Second)
	if len(g.dirs) > 0 {
		killAll(g.dirs, deadline)
	} else if g.root.pid > 0 {
		killTree(g.h.proc, g.root, deadline)
	}
	if g.kill != nil {
		g.kill()
	}
}

// Hit returns the cap that ended the command, with the name of its
// setting (Caps.Names), such as "memory over the 512 MiB cap
// (--sandbox-memory)", or "" when none was hit. It is final once Close has returned.
func (g *Group) Hit() string {
	switch g.HitCap() {
	case CapMemory:
		return fmt.Sprintf("memory over the %s cap%s", FormatSize(g.caps.MemoryBytes), setBy(g.caps.Names.Memory))
	case CapPids:
		return fmt.Sprintf("processes over the %d cap%s", g.caps.Pids, setBy(g.caps.Names.Pids))
	case CapDisk:
		return fmt.Sprintf("disk use over the %s cap%s", FormatSize(g.caps.DiskBytes), setBy(g.caps.Names.Disk))
	}
	return ""
}

// Check looks at the cgroups' event counters now, not waiting for the
// watcher's next poll (the kernel may have killed a process at its memory
// cap just before the command answered), and returns Hit(). A hit found
// here ends the sandbox, as the watcher would.
func (g *Group) Check() string {
	if h := g.Hit(); h != "" {
		return h
	}
	for _, d := range g.dirs {
		if hit := d.hitIn(); hit != "" {
			g.mu.Lock()
			if g.hitCap == "" {
				g.hitCap = hit
			}
			g.mu.Unlock()
			g.killEverything()
			break
		}
	}
	return g.Hit()
}

// HitCap returns the name of the cap that was hit ("memory", "pids",
// "disk") or "".
func (g *Group) HitCap() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.hitCap
}

// Close stops the watcher, checks the caps a last time (a command the
// kernel killed at its memory cap may have ended before the watcher
// looked), kills whatever is left of the sandbox and removes the cgroups.
// A Group never started has no command to check: its disk is not walked
// (a first Group made only to learn how the caps apply may name a large
// directory). Call it once the command has ended; calling it again
// returns the first result.
func (g *Group) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return g.closeErr
	}
	g.closed = true
	stop, done := g.stop, g.done
	g.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
		g.check(true)
	}
	deadline := time.Now().Add(5 * time.Second)
	var errs []error
	if len(g.dirs) > 0 {
		if !killAll(g.dirs, deadline) {
			errs = append(errs, errors.New("sandbox processes left after kill"))
		}
	} else if g.root.pid > 0 {
		killTree(g.h.proc, g.root, deadline)
	}
	if err := removeDirs(g.dirs, deadline); err != nil {
		errs = append(errs, err)
	}
	g.mu.Lock()
	g.closeErr = errors.Join(errs...)
	g.mu.Unlock()
	return g.closeErr
}

// TmpfsSizeArgs returns the bwrap arguments that cap the next --tmpfs at
// the disk cap ("--size", BYTES), to put just before "--tmpfs", "/tmp";
// nil without a disk cap. --size needs bubblewrap 0.8 or later.
func (g *Group) TmpfsSizeArgs() []string {
	if g.caps.DiskBytes <= 0 {
		return nil
	}
	return []string{"--size", strconv.FormatInt(g.caps.DiskBytes, 10)}
}
