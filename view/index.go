// Package view serves harness view: a local web page over the results on
// disk (run directories of harness run, directories of runs, results
// files) that lists the runs, shows a run's trials as a grid to sort and
// filter, a trial's transcript and grading, and compares runs with paired
// statistics, updating live while runs write.
//
// The server never holds whole records: its index keeps, per trial, a row
// of excerpts and numbers and where the record is on disk (a file, a byte
// offset and a length). A trial's transcript is read back from there and
// served a page of steps at a time. Files are polled: a file that grew is
// read from where the last read stopped (a torn last line waits for the
// next poll), a file replaced is read again from the start, so it works on
// network filesystems where change notification does not.
package view

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"harness/results"
	"harness/rundir"
)

// Options configures an Index.
type Options struct {
	// Roots are the paths to show: run directories, directories of runs
	// or of results files, results files (default ".").
	Roots []string
	// Poll is how often known files are checked for new records
	// (default 250 ms); Rescan how often the roots are searched for new
	// runs and files (default 2 s).
	Poll, Rescan time.Duration
	// MaxDepth bounds how deep directories are searched (default 4).
	MaxDepth int
}

// root is one given root: its real path, and the label its sources' ids
// start with when there are several roots.
type root struct {
	given string
	real  string
	label string
	isDir bool
}

// Index is what the viewer knows of the results under its roots. It is
// safe for concurrent use.
type Index struct {
	opt   Options
	roots []root

	// pollMu makes one poll at a time.
	pollMu  sync.Mutex
	mu      sync.RWMutex
	runs    map[string]*Run
	sources map[string]*Source
	files   map[string]*file // by absolute path
	// notResults remembers files that are not results files, by path,
	// with the size they had.
	notResults map[string]int64
	events     *broker
	scanned    bool
}

// Run is a run directory of harness run, or a results file on its own.
type Run struct {
	// ID is the directory's (or file's) path relative to its root.
	ID   string
	Name string
	// Dir is the run directory ("" for a results file on its own).
	Dir      string
	manifest *rundir.Manifest
	Sources  []*Source
	// locked says a process holds the output's write lock (a run is
	// writing it).
	locked bool
}

// New makes an index of the roots; call Scan (or Run) to fill it.
func New(opt Options) (*Index, error) {
	if len(opt.Roots) == 0 {
		opt.Roots = []string{"."}
	}
	if opt.Poll <= 0 {
		opt.Poll = 250 * time.Millisecond
	}
	if opt.Rescan <= 0 {
		opt.Rescan = 2 * time.Second
	}
	if opt.MaxDepth <= 0 {
		opt.MaxDepth = 4
	}
	ix := &Index{opt: opt, runs: map[string]*Run{}, sources: map[string]*Source{}, files: map[string]*file{},
		notResults: map[string]int64{}, events: newBroker(4096)}
	labels := map[string]int{}
	for _, g := range opt.Roots {
		abs, err := filepath.Abs(g)
		if err != nil {
			return nil, fmt.Errorf("view %s: %w", g, err)
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return nil, fmt.Errorf("view: %w", err)
		}
		st, err := os.Stat(real)
		if err != nil {
			return nil, fmt.Errorf("view: %w", err)
		}
		r := root{given: g, real: real, isDir: st.IsDir()}
		if out := strings.TrimSuffix(real, ".shards"); r.isDir && out != real && isResultName(filepath.Base(out)) {
			// The shard directory of a --slurm run: the run it will be
			// merged into, shown as one run with its progress, as
			// from its parent.
			r.isDir, real = false, out
		}
		if !r.isDir {
			// A file root: its directory bounds what is served, and the
			// file alone is shown.
			r.real = filepath.Dir(real)
			r.given = real
		}
		if len(opt.Roots) > 1 {
			base := filepath.Base(r.real)
			labels[base]++
			if n := labels[base]; n > 1 {
				base += "~" + strconv.Itoa(n)
			}
			r.label = base
		}
		ix.roots = append(ix.roots, r)
	}
	return ix, nil
}

// Close removes the index's temporary files.
func (ix *Index) Close() {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, f := range ix.files {
		f.close()
	}
}

// Run keeps the index up to date until ctx ends: it polls the known files
// every Poll and searches the roots every Rescan.
func (ix *Index) Run(ctx context.Context) {
	poll := time.NewTicker(ix.opt.Poll)
	defer poll.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		}
		if time.Since(last) >= ix.opt.Rescan {
			ix.Scan()
			last = time.Now()
			continue
		}
		ix.Poll()
	}
}

// Scan searches the roots for runs and results files, then reads what
// every known file gained.
func (ix *Index) Scan() {
	found := ix.discover()
	ix.mu.Lock()
	changed := ix.register(found)
	ix.mu.Unlock()
	ix.pollFiles(changed)
	ix.mu.Lock()
	ix.scanned = true
	ix.mu.Unlock()
}

// Poll reads what every known file gained.
func (ix *Index) Poll() { ix.pollFiles(false) }

// id is the id of a path under a root.
func (r root) id(abs string) (string, bool) {
	rel, err := filepath.Rel(r.real, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	rel = filepath.ToSlash(rel)
	if r.label != "" {
		if rel == "." {
			return r.label, true
		}
		return r.label + "/" + rel, true
	}
	return rel, true
}

// inside says whether the real path p lies under the root.
func (r root) inside(p string) bool {
	return p == r.real || strings.HasPrefix(p, r.real+string(filepath.Separator)) || r.real == string(filepath.Separator)
}

// found is what one search of the roots found.
type found struct {
	runDirs []foundRun
	loose   []foundFile
}

type foundRun struct {
	root     root
	dir      string
	manifest *rundir.Manifest
}

type foundFile struct {
	root root
	path string // the output's path (which may not exist yet)
}

// resultSuffixes are the names results files have.
var resultSuffixes = []string{".jsonl", ".jsonl.zst", ".jsonl.gz", ".ndjson", ".jsonl.zstd"}

func isResultName(name string) bool {
	for _, s := range resultSuffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// discover searches the roots.
func (ix *Index) discover() found {
	var fd found
	seen := map[string]bool{}
	addLoose := func(r root, p string) {
		if !seen[p] {
			seen[p] = true
			fd.loose = append(fd.loose, foundFile{r, p})
		}
	}
	for _, r := range ix.roots {
		if !r.isDir {
			addLoose(r, r.given)
			continue
		}
		filepath.WalkDir(r.real, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			rel, _ := filepath.Rel(r.real, p)
			depth := 0
			if rel != "." {
				depth = strings.Count(rel, string(filepath.Separator)) + 1
			}
			name := d.Name()
			if d.IsDir() {
				if p != r.real && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "vendor") {
					return filepath.SkipDir
				}
				if strings.HasSuffix(name, ".shards") {
					out := strings.TrimSuffix(p, ".shards")
					if isResultName(filepath.Base(out)) && !rundir.Is(filepath.Dir(p)) {
						addLoose(r, out)
					}
					return filepath.SkipDir
				}
				if rundir.Is(p) {
					if m, err := rundir.Read(p); err == nil {
						fd.runDirs = append(fd.runDirs, foundRun{r, p, m})
					}
					return filepath.SkipDir
				}
				if depth >= ix.opt.MaxDepth {
					return filepath.SkipDir
				}
				return nil
			}
			if d.Type()&fs.ModeSymlink != 0 {
				real, err := filepath.EvalSymlinks(p)
				if err != nil || !r.inside(real) {
					return nil // a link out of the root is never followed
				}
				if st, err := os.Stat(real); err != nil || !st.Mode().IsRegular() {
					return nil
				}
			} else if !d.Type().IsRegular() {
				return nil
			}
			switch {
			case strings.HasSuffix(name, ".partial") && isResultName(strings.TrimSuffix(name, ".partial")):
				addLoose(r, strings.TrimSuffix(p, ".partial"))
			case isResultName(name):
				addLoose(r, p)
			}
			return nil
		})
	}
	sort.Slice(fd.loose, func(i, j int) bool { return fd.loose[i].path < fd.loose[j].path })
	return fd
}

// register adds the runs and sources found; ix.mu is held. It says
// whether the runs list changed.
func (ix *Index) register(fd found) bool {
	changed := false
	inRunDir := map[string]bool{}
	for _, fr := range fd.runDirs {
		id, ok := fr.root.id(fr.dir)
		if !ok {
			continue
		}
		run := ix.runs[id]
		if run == nil {
			run = &Run{ID: id, Name: filepath.Base(fr.dir), Dir: fr.dir}
			ix.runs[id] = run
			changed = true
		}
		if run.manifest == nil || run.manifest.Status != fr.manifest.Status || run.manifest.Ended != fr.manifest.Ended {
			changed = true
		}
		run.manifest = fr.manifest
		for _, a := range fr.manifest.Agents {
			if a.Output == "" || strings.Contains(a.Output, "..") || filepath.IsAbs(a.Output) {
				continue
			}
			p := filepath.Join(fr.dir, a.Output)
			inRunDir[p] = true
			if s := ix.addSource(fr.root, p, a.Name, run); s != nil {
				changed = true
			}
		}
	}
	for _, ff := range fd.loose {
		if inRunDir[ff.path] {
			continue
		}
		if _, known := ix.sources[mustID(ff.root, ff.path)]; known {
			continue
		}
		if !ix.isResults(ff.path) {
			continue
		}
		id, ok := ff.root.id(ff.path)
		if !ok {
			continue
		}
		run := &Run{ID: id, Name: id}
		if s := ix.addSource(ff.root, ff.path, filepath.Base(ff.path), run); s != nil {
			ix.runs[id] = run
			changed = true
		}
	}
	return changed
}

func mustID(r root, p string) string {
	id, _ := r.id(p)
	return id
}

// addSource adds the source of an output (with its partial file and
// shards), unless known; ix.mu is held.
func (ix *Index) addSource(r root, p, name string, run *Run) *Source {
	id, ok := r.id(p)
	if !ok {
		return nil
	}
	if s, ok := ix.sources[id]; ok {
		ix.addShards(s, r)
		return nil
	}
	s := newSource(id, name, p)
	s.run = run
	s.files = append(s.files, ix.fileFor(r, p, roleMain), ix.fileFor(r, p+".partial", rolePartial))
	ix.addShards(s, r)
	ix.sources[id] = s
	run.Sources = append(run.Sources, s)
	return s
}

// addShards adds the shard files of a --slurm run that appeared.
func (ix *Index) addShards(s *Source, r root) {
	dir := s.path + ".shards"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), "shard-") || !isResultName(e.Name()) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if _, ok := ix.files[p]; ok {
			continue
		}
		s.files = append(s.files, ix.fileFor(r, p, roleShard))
	}
}

func (ix *Index) fileFor(r root, p string, role int) *file {
	f := &file{path: p, rel: mustID(r, p), role: role, gone: true}
	ix.files[p] = f
	return f
}

// isResults says whether a file (or, for an output not written yet, its
// partial file or shards) holds results records: its first line is a
// capture record, a trials record or a summary. ix.mu is held.
func (ix *Index) isResults(p string) bool {
	for _, cand := range []string{p, p + ".partial"} {
		st, err := os.Stat(cand)
		if err != nil || st.Size() == 0 {
			continue
		}
		if size, ok := ix.notResults[cand]; ok && size == st.Size() {
			continue
		}
		if sniff(cand) {
			return true
		}
		ix.notResults[cand] = st.Size()
	}
	if st, err := os.Stat(p + ".shards"); err == nil && st.IsDir() {
		return true
	}
	return false
}

// sniff reads the start of a file's first line and looks for the fields
// of a results line.
func sniff(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	r, err := results.Decompress(p, f)
	if err != nil {
		return false
	}
	br := bufio.NewReader(io.LimitReader(r, 1<<20))
	line, _ := br.ReadSlice('\n')
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return false
	}
	return bytes.Contains(line, []byte(`"trajectory":`)) || bytes.Contains(line, []byte(`"trials":[`)) ||
		bytes.Contains(line, []byte(`"type":"trials-summary"`))
}

// pollFiles reads what every file gained and publishes the changes.
func (ix *Index) pollFiles(runsChanged bool) {
	ix.pollMu.Lock()
	defer ix.pollMu.Unlock()
	ix.mu.RLock()
	type job struct {
		s *Source
		f *file
	}
	var jobs []job
	for _, s := range ix.sources {
		for _, f := range s.files {
			jobs = append(jobs, job{s, f})
		}
	}
	ix.mu.RUnlock()
	// Small files first: a run's grid fills while a big one is read.
	sizes := make(map[*file]int64, len(jobs))
	for _, j := range jobs {
		if st, err := os.Stat(j.f.path); err == nil {
			sizes[j.f] = st.Size()
		}
	}
	sort.SliceStable(jobs, func(i, j int) bool {
		if sizes[jobs[i].f] != sizes[jobs[j].f] {
			return sizes[jobs[i].f] < sizes[jobs[j].f]
		}
		return jobs[i].f.path < jobs[j].f.path
	})
	locks := writeLocks()
	for _, j := range jobs {
		// Files are read by this goroutine alone; only applying the rows
		// takes the lock, a read at a time, so the pages are served (and
		// fill) while a big file is read.
		apply := func(ch change) {
			if !ch.reset && len(ch.lines) == 0 {
				return
			}
			ix.mu.Lock()
			rows := j.s.apply(j.f, ch)
			total := j.s.live
			ix.mu.Unlock()
			if ch.reset {
				ix.events.publish("reset", sourceEvent{Source: j.s.ID})
				runsChanged = true
			}
			if len(rows) > 0 {
				ix.events.publish("rows", rowsEvent{Source: j.s.ID, Rows: keysOf(rows), Total: total})
				runsChanged = true
			}
		}
		ch, err := j.f.update(apply)
		if err != nil {
			j.f.report(err.Error())
		}
		apply(ch)
	}
	ix.mu.Lock()
	for _, run := range ix.runs {
		locked := false
		for _, s := range run.Sources {
			for _, f := range s.files {
				if ino := f.inode(); ino != 0 && locks[ino] {
					locked = true
				}
			}
		}
		if locked != run.locked {
			run.locked = locked
			runsChanged = true
		}
	}
	ix.mu.Unlock()
	if runsChanged {
		ix.events.publish("runs", struct{}{})
	}
}

// writeLocks returns the inodes with a write flock held (a harness run
// holds one on its output for the whole run), from /proc/locks; empty
// where that cannot be read.
func writeLocks() map[uint64]bool {
	out := map[uint64]bool{}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return out
	}
	pid := strconv.Itoa(os.Getpid())
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[2] == "->" || fields[3] != "WRITE" || fields[4] == pid {
			continue
		}
		dev := fields[5]
		i := strings.LastIndexByte(dev, ':')
		if i < 0 {
			continue
		}
		if ino, err := strconv.ParseUint(dev[i+1:], 10, 64); err == nil {
			out[ino] = true
		}
	}
	return out
}

// Status of a run: running, finished or interrupted.
func (run *Run) status() string {
	if m := run.manifest; m != nil {
		switch m.Status {
		case "running":
			// Between its agents a run holds no lock for a moment: a run
			// whose files changed within the last half minute still runs.
			if run.locked || run.recent() {
				return "running"
			}
			return "interrupted"
		case "done":
			return "finished"
		case "":
			return "unknown"
		}
		return "interrupted"
	}
	if run.locked {
		return "running"
	}
	for _, s := range run.Sources {
		if s.hasPartial() {
			// The partial file outlives a run only when it was stopped.
			return "interrupted"
		}
		if st, err := os.Stat(s.path + ".shards"); err == nil && st.IsDir() {
			if _, err := os.Stat(s.path); errors.Is(err, os.ErrNotExist) {
				return "running"
			}
		}
	}
	return "finished"
}

// recent says whether the run directory or one of its outputs changed in
// the last 30 s.
func (run *Run) recent() bool {
	paths := []string{filepath.Join(run.Dir, rundir.ManifestName)}
	for _, s := range run.Sources {
		paths = append(paths, s.path, s.path+".partial")
	}
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && time.Since(st.ModTime()) < 30*time.Second {
			return true
		}
	}
	return false
}

// lookup returns the source of an id; ix.mu is held.
func (ix *Index) lookup(id string) (*Source, error) {
	if err := ix.checkPath(id); err != nil {
		return nil, err
	}
	s, ok := ix.sources[id]
	if !ok {
		return nil, fmt.Errorf("%w: no results file %q under the roots", errNotFound, id)
	}
	return s, nil
}

var (
	errNotFound  = errors.New("not found")
	errForbidden = errors.New("forbidden")
)

// checkPath refuses an id that is not a clean path under a root: absolute
// paths, ".." elements, and paths whose real location (links resolved) is
// outside every root.
func (ix *Index) checkPath(id string) error {
	if id == "" || strings.ContainsRune(id, 0) || strings.HasPrefix(id, "/") || strings.Contains(id, "\\") {
		return fmt.Errorf("%w: %q is not a path under the roots", errForbidden, id)
	}
	for _, el := range strings.Split(id, "/") {
		if el == ".." || el == "." || el == "" {
			return fmt.Errorf("%w: %q is not a clean path under the roots (no \"..\")", errForbidden, id)
		}
	}
	for _, r := range ix.roots {
		rel := id
		if r.label != "" {
			var ok bool
			if rel, ok = strings.CutPrefix(id, r.label+"/"); !ok {
				continue
			}
		}
		p := filepath.Join(r.real, filepath.FromSlash(path.Clean(rel)))
		real, err := filepath.EvalSymlinks(p)
		if errors.Is(err, os.ErrNotExist) {
			// An output not written yet: its directory must be inside.
			real, err = filepath.EvalSymlinks(filepath.Dir(p))
		}
		if err != nil {
			continue
		}
		if r.inside(real) {
			return nil
		}
		return fmt.Errorf("%w: %q leads out of the roots", errForbidden, id)
	}
	return fmt.Errorf("%w: %q is not under the roots", errNotFound, id)
}

// Roots returns the roots as given.
func (ix *Index) Roots() []string {
	var out []string
	for _, r := range ix.roots {
		out = append(out, r.given)
	}
	return out
}
