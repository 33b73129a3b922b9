package view

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"harness/results"
	"harness/schemas"
)

// Roles of a file in a source.
const (
	roleMain    = 0 // the output: capture records, or trials records of finished cases
	rolePartial = 1 // OUTPUT.partial: finished trials of cases in progress
	roleShard   = 2 // OUTPUT.shards/shard-*.jsonl of a --slurm run
)

// priority orders what a source believes when two files hold the same
// trial: the output over shards over the partial file.
func priority(role int) int {
	switch role {
	case roleMain:
		return 2
	case roleShard:
		return 1
	}
	return 0
}

// maxProblems bounds the bad lines a file remembers.
const maxProblems = 20

// file is one results file being indexed. It is read from where the last
// read stopped: complete lines only, a torn last line is left for the next
// read. A file replaced (another inode, a shorter size, other first bytes)
// is read again from the start. A compressed file is decompressed whole
// into a spool file, which its locations point into.
type file struct {
	// mu guards the fields below path, rel and role: the poller updates
	// them while the server reads records.
	mu   sync.Mutex
	path string // absolute
	rel  string // as shown, relative to its root
	role int

	off    int64 // bytes of complete lines read
	lineNo int
	ino    uint64
	dev    uint64
	size   int64
	head   []byte // the first bytes, to tell a file rewritten in place
	// compressed files: the spool holding the decompressed content.
	compressed bool
	spool      *os.File
	kind       string
	problems   []string
	nProblems  int
	gone       bool
}

// headLen is how many first bytes identify a file's content.
const headLen = 256

// change is what one read of a file found.
type change struct {
	lines []parsedLine
	// reset says the file was replaced: every row from it is void.
	reset bool
}

// The read size starts small, so the first rows of a big file are there
// at once, and doubles up to readBuf; a longer line grows it further.
const (
	firstReadBuf = 256 << 10
	readBuf      = 16 << 20
)

// update reads what the file gained since the last read. It returns the
// change; when emit is set, it hands each read's lines to emit as they
// are parsed (f.mu released meanwhile), and returns only what is left.
func (f *file) update(emit func(change)) (change, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fh, err := os.Open(f.path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if f.off > 0 || f.ino != 0 {
				f.resetState()
				f.gone = true
				return change{reset: true}, nil
			}
			f.gone = true
			return change{}, nil
		}
		return change{}, fmt.Errorf("view %s: %w", f.rel, err)
	}
	defer fh.Close()
	f.gone = false
	st, err := fh.Stat()
	if err != nil {
		return change{}, fmt.Errorf("view %s: %w", f.rel, err)
	}
	var ino, dev uint64
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		ino, dev = sys.Ino, uint64(sys.Dev)
	}
	size := st.Size()
	var ch change
	replaced := f.ino != 0 && (ino != f.ino || dev != f.dev)
	if !replaced && size < f.size {
		replaced = true
	}
	if !replaced && len(f.head) > 0 && size != f.size {
		head := make([]byte, len(f.head))
		if n, _ := fh.ReadAt(head, 0); n < len(head) || !bytes.Equal(head, f.head) {
			replaced = true
		}
	}
	if replaced {
		f.resetState()
		ch.reset = true
	}
	if ino == f.ino && dev == f.dev && size == f.size && !ch.reset {
		return ch, nil
	}
	f.ino, f.dev = ino, dev
	if size == 0 {
		f.size = 0
		return ch, nil
	}
	if len(f.head) < headLen && size > int64(len(f.head)) {
		head := make([]byte, min(int64(headLen), size))
		n, _ := fh.ReadAt(head, 0)
		f.head = head[:n]
	}
	if f.off == 0 && f.size == 0 {
		magic := make([]byte, 4)
		n, _ := fh.ReadAt(magic, 0)
		f.compressed = isCompressed(magic[:n])
	}
	f.size = size
	if f.compressed {
		if err := f.respool(fh); err != nil {
			return ch, err
		}
		ch.reset = true
		f.off, f.lineNo = 0, 0
		return f.readLines(f.spool, ch, emit)
	}
	return f.readLines(fh, ch, emit)
}

func (f *file) resetState() {
	f.off, f.lineNo, f.ino, f.dev, f.size, f.head, f.kind = 0, 0, 0, 0, 0, nil, ""
	f.problems, f.nProblems = nil, 0
}

func isCompressed(magic []byte) bool {
	return bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}) || bytes.HasPrefix(magic, []byte{0x1f, 0x8b})
}

// respool decompresses the whole file into a new spool file. A stream cut
// short (still being written) keeps what decompressed.
func (f *file) respool(fh *os.File) error {
	if f.spool != nil {
		f.spool.Close()
		os.Remove(f.spool.Name())
		f.spool = nil
	}
	sp, err := os.CreateTemp("", "harness-view-*.jsonl")
	if err != nil {
		return fmt.Errorf("view %s: spool: %w", f.rel, err)
	}
	if _, err := fh.Seek(0, io.SeekStart); err != nil {
		sp.Close()
		os.Remove(sp.Name())
		return fmt.Errorf("view %s: %w", f.rel, err)
	}
	r, err := results.Decompress(f.path, io.NopCloser(fh))
	if err != nil {
		sp.Close()
		os.Remove(sp.Name())
		return err
	}
	_, err = io.Copy(sp, r)
	r.Close()
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		f.problem(fmt.Sprintf("%s: decompressing: %v (the records read so far are shown)", f.rel, err))
	}
	f.spool = sp
	return nil
}

// close removes the spool file, if any.
func (f *file) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.spool != nil {
		f.spool.Close()
		os.Remove(f.spool.Name())
		f.spool = nil
	}
}

// readLines reads complete lines from f.off on and parses them, the
// lines of each read spread over the processors. Each read's lines go to
// emit, when set, with ch's reset on the first; what is not emitted is
// returned.
func (f *file) readLines(r io.ReaderAt, ch change, emit func(change)) (change, error) {
	var out []parsedLine
	flush := func() {
		if emit == nil || (len(out) == 0 && !ch.reset) {
			return
		}
		ch.lines = out
		f.mu.Unlock()
		emit(ch)
		f.mu.Lock()
		out, ch = nil, change{}
	}
	done := func(err error) (change, error) {
		ch.lines = out
		return ch, err
	}
	buf := make([]byte, firstReadBuf)
	type line struct {
		b   []byte
		off int64
		no  int
	}
	var lines []line
	for {
		n, err := r.ReadAt(buf, f.off)
		if err != nil && !errors.Is(err, io.EOF) {
			return done(fmt.Errorf("view %s: %w", f.rel, err))
		}
		data := buf[:n]
		consumed := 0
		lines = lines[:0]
		for {
			i := bytes.IndexByte(data[consumed:], '\n')
			if i < 0 {
				break
			}
			b := data[consumed : consumed+i]
			off := f.off + int64(consumed)
			consumed += i + 1
			f.lineNo++
			if len(bytes.TrimSpace(b)) > 0 {
				lines = append(lines, line{b, off, f.lineNo})
			}
		}
		parsed := make([]parsedLine, len(lines))
		errs := make([]error, len(lines))
		var next atomic.Int64
		var wg sync.WaitGroup
		for range min(runtime.GOMAXPROCS(0), len(lines)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					j := int(next.Add(1) - 1)
					if j >= len(lines) {
						return
					}
					parsed[j], errs[j] = parseLine(lines[j].b, lines[j].off, f)
				}
			}()
		}
		wg.Wait()
		for j, pl := range parsed {
			if errs[j] != nil {
				f.badLine(errs[j], lines[j].no)
				continue
			}
			pl.line = lines[j].no
			if !f.checkKind(pl) {
				continue
			}
			out = append(out, pl)
		}
		f.off += int64(consumed)
		if n < len(buf) {
			// At the end: what is left has no newline yet (a torn line,
			// read again when it is whole).
			return done(nil)
		}
		flush()
		if consumed == 0 || len(buf) < readBuf {
			// A line longer than the buffer, or a first read.
			buf = make([]byte, 2*len(buf))
		}
	}
}

// checkKind keeps a file to one kind of record, as schemas.ReadResults does.
func (f *file) checkKind(pl parsedLine) bool {
	kind := ""
	switch pl.kind {
	case lineCapture:
		kind = schemas.KindCapture
	case lineTrials:
		kind = schemas.KindTrials
	default:
		return true
	}
	if f.kind == "" {
		f.kind = kind
		return true
	}
	if f.kind != kind {
		f.badLine(&schemas.InputError{Msg: fmt.Sprintf("a %s record in a file of %s records", kind, f.kind)}, pl.line)
		return false
	}
	return true
}

func (f *file) badLine(err error, line int) {
	var ie *schemas.InputError
	if errors.As(err, &ie) {
		ie.File, ie.Line = f.rel, line
		f.problem(ie.Error())
		return
	}
	f.problem(fmt.Sprintf("%s:%d: %v", f.rel, line, err))
}

// report adds a problem found outside a read.
func (f *file) report(msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.problem(msg)
}

// problemList returns the file's problems, and whether some were left out.
func (f *file) problemList() ([]string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.problems...), f.nProblems > len(f.problems)
}

// isGone says whether the file was missing at the last read.
func (f *file) isGone() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gone
}

// inode returns the file's inode at the last read (0 before it).
func (f *file) inode() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ino
}

func (f *file) problem(msg string) {
	f.nProblems++
	if len(f.problems) < maxProblems {
		f.problems = append(f.problems, msg)
	}
}

// readAt reads a record's bytes back.
func (f *file) readAt(loc location) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := make([]byte, loc.n)
	var r io.ReaderAt
	if f.compressed {
		if f.spool == nil {
			return nil, fmt.Errorf("view %s: the decompressed copy is gone", f.rel)
		}
		r = f.spool
	} else {
		fh, err := os.Open(f.path)
		if err != nil {
			return nil, fmt.Errorf("view %s: %w", f.rel, err)
		}
		defer fh.Close()
		r = fh
	}
	if _, err := r.ReadAt(b, loc.off); err != nil {
		return nil, fmt.Errorf("view %s: record at byte %d: %w", f.rel, loc.off, err)
	}
	return b, nil
}
