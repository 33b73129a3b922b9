package results

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Open opens a JSONL file for reading, decompressing by file name. The name
// "-" reads standard input from stdin.
func Open(name string, stdin io.Reader) (io.ReadCloser, error) {
	var f io.ReadCloser
	if name == "-" {
		f = io.NopCloser(stdin)
	} else {
		file, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		f = file
	}
	return Decompress(name, f)
}

// Magic numbers at the start of compressed streams.
var (
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
	gzipMagic = []byte{0x1f, 0x8b}
)

// Decompress wraps r in the decompressor its content calls for: zstd and
// gzip are told by their magic numbers, whatever the file is called, so a
// compressed file renamed, piped in or named without a suffix is read all
// the same. Content that starts with neither is plain text.
func Decompress(name string, r io.ReadCloser) (io.ReadCloser, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, _ := br.Peek(len(zstdMagic))
	rc := &stackCloser{Reader: br, closers: []io.Closer{r}}
	switch {
	case bytes.HasPrefix(magic, zstdMagic):
		return decompress(name, "zst", rc)
	case bytes.HasPrefix(magic, gzipMagic):
		return decompress(name, "gz", rc)
	}
	return rc, nil
}

// decompress wraps r, the content of file name, in the decompressor of
// kind ("zst" or "gz").
func decompress(name, kind string, r io.ReadCloser) (io.ReadCloser, error) {
	switch kind {
	case "zst":
		d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<31))
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return &zstdReadCloser{d: d, under: r}, nil
	case "gz":
		g, err := gzip.NewReader(r)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return &stackCloser{Reader: g, closers: []io.Closer{g, r}}, nil
	}
	return r, nil
}

type zstdReadCloser struct {
	d     *zstd.Decoder
	under io.Closer
}

func (z *zstdReadCloser) Read(p []byte) (int, error) { return z.d.Read(p) }
func (z *zstdReadCloser) Close() error {
	z.d.Close()
	return z.under.Close()
}

type stackCloser struct {
	io.Reader
	closers []io.Closer
}

func (s *stackCloser) Close() error {
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// Writer appends JSON records, one a line. It is safe for concurrent use;
// each Write puts one whole record on the output and flushes it (and, for
// compressed output, ends a compressed block) before returning.
type Writer struct {
	mu    sync.Mutex
	out   io.Writer
	buf   *bufio.Writer
	flush func() error
	close func() error
	err   error
	// batch turns off the flush after every record (for copies, where a
	// crash loses nothing that is not still in the source).
	batch bool
	// key, when set, signs every line.
	key *Key
}

// Sign makes the writer sign every line it writes with k (see Key.Sign).
func (w *Writer) Sign(k *Key) { w.key = k }

// Batch makes Write and WriteRaw leave records in the buffer until Close,
// for bulk copies that need not survive a crash record by record.
func (w *Writer) Batch() { w.batch = true }

// NewWriter writes records to w, compressed as name calls for. The caller
// still owns w; Close flushes and ends the compressed stream but does not
// close w.
func NewWriter(name string, w io.Writer) (*Writer, error) {
	jw := &Writer{out: w}
	switch {
	case strings.HasSuffix(name, ".zst"):
		z, err := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true), zstd.WithWindowSize(1<<20))
		if err != nil {
			return nil, err
		}
		jw.buf = bufio.NewWriterSize(z, 1<<16)
		jw.flush = z.Flush
		jw.close = z.Close
	case strings.HasSuffix(name, ".gz"):
		g := gzip.NewWriter(w)
		jw.buf = bufio.NewWriterSize(g, 1<<16)
		jw.flush = g.Flush
		jw.close = g.Close
	default:
		jw.buf = bufio.NewWriterSize(w, 1<<16)
		jw.flush = func() error { return nil }
		jw.close = func() error { return nil }
	}
	return jw, nil
}

// Write encodes v as one line and flushes it to the underlying writer.
func (w *Writer) Write(v any) error {
	b, err := Marshal(v)
	if err != nil {
		return err
	}
	return w.WriteRaw(b)
}

// WriteRaw writes one already-encoded record (without its newline) and
// flushes it.
func (w *Writer) WriteRaw(b []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if w.key != nil {
		b, _ = w.key.Sign(b)
	}
	w.buf.Write(b)
	w.buf.WriteByte('\n')
	if w.batch {
		return nil
	}
	if err := w.buf.Flush(); err != nil {
		w.err = err
		return err
	}
	if err := w.flush(); err != nil {
		w.err = err
		return err
	}
	return nil
}

// Close ends the compressed stream, if any.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.buf.Flush(); err != nil {
		return err
	}
	return w.close()
}

// Marshal encodes v as compact JSON without HTML escaping, so "<" and "&" in
// agent text stay as they are.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
