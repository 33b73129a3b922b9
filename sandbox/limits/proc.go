package limits

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procInfo is what the watcher needs of one process, from /proc/PID/stat.
type procInfo struct {
	pid, ppid int
	state     byte
	threads   int
	rss       int64 // bytes
	start     uint64
}

// readProc reads /proc/PID/stat.
func readProc(proc string, pid int) (procInfo, bool) {
	data, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		return procInfo{}, false
	}
	return parseStat(pid, string(data))
}

// parseStat parses a stat line: pid (comm) state ppid ... The command
// name may hold spaces and parentheses, so fields count from the last ")".
func parseStat(pid int, s string) (procInfo, bool) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 22 {
		return procInfo{}, false
	}
	p := procInfo{pid: pid, state: f[0][0]}
	p.ppid, _ = strconv.Atoi(f[1])
	p.threads, _ = strconv.Atoi(f[17])
	p.start, _ = strconv.ParseUint(f[19], 10, 64)
	pages, _ := strconv.ParseInt(f[21], 10, 64)
	p.rss = pages * int64(os.Getpagesize())
	return p, true
}

// processTree returns the live processes under root (root included, when
// it still runs) in breadth-first order, root first. It finds children
// by their parent pid, so a process whose parent died before it was seen
// is missed: under bwrap's own PID namespace orphans are adopted by the
// namespace's init, which stays in the tree.
func processTree(proc string, root procInfo) []procInfo {
	cur, ok := readProc(proc, root.pid)
	if !ok || cur.start != root.start {
		return nil // ended, and its pid may be someone else's now
	}
	ents, err := os.ReadDir(proc)
	if err != nil {
		return nil
	}
	children := map[int][]procInfo{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(proc, pid); ok {
			children[p.ppid] = append(children[p.ppid], p)
		}
	}
	var out []procInfo
	queue := []procInfo{cur}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p.state != 'Z' {
			out = append(out, p)
		}
		queue = append(queue, children[p.pid]...)
	}
	return out
}

// killTree kills the processes under root, again and again until none is
// left or the deadline passes. Every pass kills a snapshot of the whole
// tree at once, so children reparented when their parent dies are
// killed in the same pass.
func killTree(proc string, root procInfo, deadline time.Time) {
	pause := newBackoff()
	for {
		tree := processTree(proc, root)
		if len(tree) == 0 {
			return
		}
		for _, p := range tree {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
		if time.Now().After(deadline) {
			return
		}
		pause()
	}
}

// diskUsage returns the space the files under dir take on disk
// (allocated blocks, so a sparse file counts what it holds; a file with
// several links counts once). Links are not followed.
func diskUsage(dir string) int64 {
	var total int64
	seen := map[[2]uint64]bool{}
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // gone meanwhile, or unreadable: skip it
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			total += info.Size()
			return nil
		}
		if st.Nlink > 1 && !d.IsDir() {
			key := [2]uint64{st.Dev, st.Ino}
			if seen[key] {
				return nil
			}
			seen[key] = true
		}
		total += st.Blocks * 512
		return nil
	})
	return total
}
