package results

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"harness/schemas"
)

// Mode says what OpenOutput does with an output file that already holds
// something.
type Mode int

const (
	// New refuses an existing non-empty regular file.
	New Mode = iota
	// Append continues an existing file (--resume).
	Append
	// Truncate empties an existing regular file (--force). It never
	// removes or replaces the path itself.
	Truncate
)

// ExistsError reports an output that already holds data.
type ExistsError struct {
	Path string
	// Resumable says the command could continue the output instead.
	Resumable bool
}

func (e *ExistsError) Error() string {
	return fmt.Sprintf("output %s already exists", e.Path)
}

// LockedError reports an output another process is writing.
type LockedError struct {
	Path string
	// PID and Command name the process holding the lock, when the system
	// tells (from /proc/locks); PID is 0 when it does not.
	PID     int
	Command string
}

func (e *LockedError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = fmt.Sprintf("process %d", e.PID)
		if e.Command != "" {
			holder += fmt.Sprintf(" (%s)", e.Command)
		}
	}
	return fmt.Sprintf("output %s is locked by %s, which is writing it; wait for it to end, or write elsewhere", e.Path, holder)
}

// Output is a record stream being written: a locked regular file, a file
// that is not regular (written through), or standard output.
type Output struct {
	name    string // as given
	path    string // with symlinks resolved; "" for stdout
	regular bool
	created bool // the file did not exist before OpenOutput
	file    *os.File
	w       *Writer
	redact  func([]byte) []byte
	key     *Key

	mu      sync.Mutex
	written int
	// macs counts the MACs (their first 8 bytes) of the lines the file
	// holds by harness's hand: those written and those Resume kept.
	macs map[uint64]int32
}

// OutputOptions configure OpenOutput.
type OutputOptions struct {
	// Mode says what to do with an existing file.
	Mode Mode
	// Stdout is written when the name is "" or "-".
	Stdout io.Writer
	// Redact, when set, rewrites every encoded record before it is
	// written (secrets out).
	Redact func([]byte) []byte
	// Resumable says the command can continue an existing output; it is
	// carried on the ExistsError that refuses one.
	Resumable bool
	// Key, when set, signs every line written (see Key.Sign), makes
	// Resume refuse a line it did not sign, and lets CheckWritten tell
	// the lines harness wrote from any other.
	Key *Key
}

// OpenOutput opens name for writing records, compressed as its suffix says
// (.zst, .gz). A regular file (or a name that does not exist yet) is
// created with mode 0666 less the umask and locked for as long as the
// Output is open; anything else is written through as it is.
func OpenOutput(name string, opts OutputOptions) (*Output, error) {
	o := &Output{name: name, redact: opts.Redact, key: opts.Key, macs: map[uint64]int32{}}
	if name == "" || name == "-" {
		if opts.Mode == Append {
			return nil, fmt.Errorf("output: standard output cannot be continued: name an output file")
		}
		w, err := NewWriter("", opts.Stdout)
		if err != nil {
			return nil, err
		}
		o.w = w
		return o, nil
	}
	st, err := os.Stat(name)
	if err == nil && !st.Mode().IsRegular() {
		if opts.Mode == Append {
			return nil, fmt.Errorf("output %s cannot be continued: it is a %s, not a regular file", name, fileKind(st.Mode()))
		}
		f, err := os.OpenFile(name, os.O_WRONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("output: %w", err)
		}
		return o.start(f)
	}
	o.regular = true
	o.path = name
	if real, err := filepath.EvalSymlinks(name); err == nil {
		o.path = real
	}
	if _, err := os.Lstat(o.path); errors.Is(err, fs.ErrNotExist) {
		o.created = true
	}
	f, err := openLocked(o.path, os.O_RDWR|os.O_CREATE|os.O_APPEND)
	var le *LockedError
	if errors.As(err, &le) {
		le.Path = name
	}
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		switch opts.Mode {
		case New:
			f.Close()
			return nil, &ExistsError{Path: name, Resumable: opts.Resumable}
		case Truncate:
			err = f.Truncate(0)
		case Append:
			err = endLine(f)
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("output %s: %w", name, err)
		}
	}
	return o.start(f)
}

func (o *Output) start(f *os.File) (*Output, error) {
	w, err := NewWriter(o.name, f)
	if err != nil {
		f.Close()
		return nil, err
	}
	o.file, o.w = f, w
	return o, nil
}

// openLocked opens path and takes an exclusive lock on it without
// waiting. If path was renamed over while the lock was being taken, the
// new file is opened and locked instead, so the lock held is always on the
// file the path names.
func openLocked(path string, flags int) (*os.File, error) {
	for range 10 {
		f, err := os.OpenFile(path, flags, 0o666)
		if err != nil {
			return nil, fmt.Errorf("output: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			le := &LockedError{Path: path}
			if errors.Is(err, syscall.EWOULDBLOCK) {
				if st, serr := f.Stat(); serr == nil {
					le.PID, le.Command = lockHolder(st)
				}
				f.Close()
				return nil, le
			}
			f.Close()
			return nil, fmt.Errorf("output %s: lock: %w", path, err)
		}
		fst, err1 := f.Stat()
		pst, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(fst, pst) {
			return f, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("output %s: replaced while it was being locked", path)
}

// lockHolder finds the process holding a flock on the file of st, from
// /proc/locks; it returns 0 when that cannot be told.
func lockHolder(st fs.FileInfo) (int, string) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, ""
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0, ""
	}
	defer f.Close()
	// Lines read: "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF", with
	// "->" before the type for a waiting request.
	want := ":" + strconv.FormatUint(sys.Ino, 10)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[2] == "->" {
			continue
		}
		if !strings.HasSuffix(fields[5], want) {
			continue
		}
		pid, err := strconv.Atoi(fields[4])
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		return pid, strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))
	}
	return 0, ""
}

// Name is the output's name as given.
func (o *Output) Name() string { return o.name }

// IsFile reports whether the output is a regular file (which can be read
// back, resumed and reported on).
func (o *Output) IsFile() bool { return o.regular }

// Write encodes v as one line and writes it whole.
func (o *Output) Write(v any) error {
	b, err := Marshal(v)
	if err != nil {
		return err
	}
	return o.WriteRaw(b)
}

// WriteRaw writes one encoded record (no newline) whole and flushes it. The
// first error sticks: every later write returns it.
func (o *Output) WriteRaw(b []byte) error {
	if o.redact != nil {
		b = o.redact(b)
	}
	var mac [sha256.Size]byte
	if o.key != nil {
		b, mac = o.key.Sign(b)
	}
	if err := o.w.WriteRaw(b); err != nil {
		return fmt.Errorf("output %s: %w", o.displayName(), err)
	}
	o.mu.Lock()
	o.written++
	o.macs[macID(mac)]++
	o.mu.Unlock()
	return nil
}

// Written is the number of records written so far.
func (o *Output) Written() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.written
}

func (o *Output) displayName() string {
	if o.name == "" || o.name == "-" {
		return "stdout"
	}
	return o.name
}

// Close ends the compressed stream, syncs a file to disk and releases the
// lock.
func (o *Output) Close() error {
	err := o.w.Close()
	if o.file != nil {
		if o.regular {
			err = errors.Join(err, o.file.Sync())
		}
		err = errors.Join(err, o.file.Close())
	}
	if err != nil {
		return fmt.Errorf("output %s: %w", o.displayName(), err)
	}
	return nil
}

// Discard closes an output nothing was written to, and removes the file
// if OpenOutput created it: a run that stops before its first record (an
// agent that does not start) leaves no trace.
func (o *Output) Discard() error {
	if o.Written() > 0 {
		return o.Close()
	}
	if o.created && o.file != nil {
		os.Remove(o.path)
	}
	return o.Close()
}

// Resume passes every line the output holds to keep, and when keep
// rejects any (or the file ends torn by a crash) replaces the file with the
// lines kept: written to a locked temporary file beside it, synced, and
// renamed over it, so no kept record is ever at risk and the lock is never
// let go. It must be called before the first write, and reports how many
// lines were taken out. With a key, every line but a last one torn by a
// crash must be one harness signed: any other stops the resume with a
// *ForeignLineError naming the file and line, the file left as it was.
func (o *Output) Resume(keep func(line []byte) bool) (int, error) {
	if !o.regular {
		return 0, fmt.Errorf("output %s cannot be continued: not a regular file", o.displayName())
	}
	r, err := Open(o.path, nil)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	tmp, err := createTemp(o.path)
	if err != nil {
		return 0, err
	}
	keepTmp := false
	defer func() {
		if !keepTmp {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := syscall.Flock(int(tmp.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return 0, fmt.Errorf("output %s: lock: %w", o.name, err)
	}
	if st, err := o.file.Stat(); err == nil {
		tmp.Chmod(st.Mode().Perm())
	}
	w, err := NewWriter(o.name, tmp)
	if err != nil {
		return 0, err
	}
	w.Batch()
	dropped := 0
	macs := map[uint64]int32{}
	take := func(lineNo int, line []byte, last bool) error {
		if o.key != nil {
			if last && !json.Valid(line) {
				dropped++ // a line the crash cut short
				return nil
			}
			_, mac, err := o.key.Verify(o.name, lineNo, line)
			if err != nil {
				return err
			}
			if !keep(line) {
				dropped++
				return nil
			}
			macs[macID(mac)]++
			return w.WriteRaw(line)
		}
		if !keep(line) {
			dropped++
			return nil
		}
		return w.WriteRaw(line)
	}
	// Each line is taken when the next is read, so the last one is known.
	var pending []byte
	pendingNo := 0
	err = schemas.EachLine(r, func(lineNo int, line []byte) error {
		if pendingNo > 0 {
			if err := take(pendingNo, pending, false); err != nil {
				return err
			}
		}
		pending, pendingNo = append(pending[:0], line...), lineNo
		return nil
	})
	torn := errors.Is(err, io.ErrUnexpectedEOF)
	if (err == nil || torn) && pendingNo > 0 {
		err = take(pendingNo, pending, true)
	}
	var fe *ForeignLineError
	if errors.As(err, &fe) {
		return 0, err
	}
	if torn && err == nil {
		// A compressed stream the crash cut short: every whole record
		// before the cut was read.
		dropped++
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", o.name, err)
	}
	if err := errors.Join(w.Close(), tmp.Sync()); err != nil {
		return 0, fmt.Errorf("output %s: %w", o.name, err)
	}
	o.mu.Lock()
	for mac, n := range macs {
		o.macs[mac] += n
	}
	o.mu.Unlock()
	if dropped == 0 {
		return 0, nil
	}
	if err := os.Rename(tmp.Name(), o.path); err != nil {
		return 0, fmt.Errorf("output %s: %w", o.name, err)
	}
	keepTmp = true
	old := o.file
	if _, err := o.start(tmp); err != nil {
		return 0, err
	}
	old.Close()
	return dropped, nil
}

// createTemp creates an empty file beside path, with mode 0666 less the
// umask (as the file it will replace was created), opened for appending.
func createTemp(path string) (*os.File, error) {
	dir, base := filepath.Split(path)
	for range 100 {
		var rnd [6]byte
		rand.Read(rnd[:])
		name := filepath.Join(dir, "."+base+".tmp-"+hex.EncodeToString(rnd[:]))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o666)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			// The error names the file asked for, not the temporary one
			// the user never named.
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = &fs.PathError{Op: "create", Path: path, Err: pe.Err}
			}
			return nil, fmt.Errorf("output: %w", err)
		}
		return f, nil
	}
	return nil, fmt.Errorf("output %s: cannot create a temporary file beside it", path)
}

// endLine makes sure a plain-text file ends with a newline before records
// are appended, so a line torn by a crash stays a line of its own and the
// next record is not glued to it. Compressed files are left alone: a torn
// frame is taken out by Resume.
func endLine(f *os.File) error {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return err
	}
	head := make([]byte, len(zstdMagic))
	if n, _ := f.ReadAt(head, 0); n >= 2 && (string(head[:n]) == string(zstdMagic) || string(head[:2]) == string(gzipMagic)) {
		return nil
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, st.Size()-1); err != nil {
		return err
	}
	if last[0] != '\n' {
		_, err = f.Write([]byte("\n"))
	}
	return err
}

func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeCharDevice != 0, m&fs.ModeDevice != 0:
		return "device"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m.IsDir():
		return "directory"
	}
	return "special file"
}

// macID is what Output keeps of a MAC to tell its lines from others: 8
// bytes, as a line must carry a valid MAC before it is looked up.
func macID(mac [sha256.Size]byte) uint64 { return binary.LittleEndian.Uint64(mac[:8]) }

// ForeignLinesError reports an output that holds lines harness did not
// write (or lost lines it did).
type ForeignLinesError struct {
	File string
	// Lines are the foreign lines found (at most MaxProblems), in file
	// order; N counts them all.
	Lines []*ForeignLineError
	N     int
	// Missing counts the lines harness wrote that are no longer there.
	Missing int
}

// Error names the file and every foreign line.
func (e *ForeignLinesError) Error() string {
	var b strings.Builder
	lines := "lines"
	if e.N == 1 {
		lines = "line"
	}
	fmt.Fprintf(&b, "output %s holds %d %s harness did not write; its records cannot be trusted", e.File, e.N, lines)
	if e.N == 0 {
		b.Reset()
		fmt.Fprintf(&b, "output %s was changed by something else than harness; its records cannot be trusted", e.File)
	}
	for _, l := range e.Lines {
		b.WriteString("\n  " + l.Error())
	}
	if e.N > len(e.Lines) {
		fmt.Fprintf(&b, "\n  ... and %d more", e.N-len(e.Lines))
	}
	if e.Missing > 0 {
		fmt.Fprintf(&b, "\n  %d lines harness wrote are gone", e.Missing)
	}
	return b.String()
}

// CheckWritten reads a closed regular-file output back and checks that it
// holds exactly the lines harness put there (written, or kept by Resume):
// a line not signed with the key, or signed but not one of these (a copy
// of a line from elsewhere, a second copy), is reported in a
// *ForeignLinesError naming the file and line, as are lines gone missing.
// Outputs that are not regular files, or have no key, are not checked.
func (o *Output) CheckWritten() error {
	if !o.regular || o.key == nil {
		return nil
	}
	r, err := Open(o.path, nil)
	if err != nil {
		return fmt.Errorf("output %s: read back: %w", o.name, err)
	}
	defer r.Close()
	o.mu.Lock()
	want := make(map[uint64]int32, len(o.macs))
	for mac, n := range o.macs {
		want[mac] = n
	}
	o.mu.Unlock()
	fe := &ForeignLinesError{File: o.name}
	foreign := func(l *ForeignLineError) {
		fe.N++
		if len(fe.Lines) < MaxProblems {
			fe.Lines = append(fe.Lines, l)
		}
	}
	err = schemas.EachLine(r, func(lineNo int, line []byte) error {
		_, mac, err := o.key.Verify(o.name, lineNo, line)
		var l *ForeignLineError
		switch {
		case errors.As(err, &l):
			foreign(l)
		case err != nil:
			return err
		case want[macID(mac)] == 0:
			foreign(&ForeignLineError{File: o.name, Line: lineNo, Why: "not written by harness to this file (a copy of a line harness wrote elsewhere, or a second copy of one it wrote here)"})
		default:
			want[macID(mac)]--
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("output %s: read back: %w", o.name, err)
	}
	for _, n := range want {
		fe.Missing += int(n)
	}
	if fe.N > 0 || fe.Missing > 0 {
		return fe
	}
	return nil
}
