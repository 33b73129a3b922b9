package acp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	fastjson "github.com/segmentio/encoding/json"
	"github.com/sourcegraph/jsonrpc2"
)

// MaxLineBytes is the longest line read from an agent. A longer line is
// recorded as junk and skipped.
const MaxLineBytes = 256 << 20

// Junk is a line on the agent's stdout that is not a JSON-RPC message.
type Junk struct {
	At     time.Time
	Line   []byte // possibly cut to its first 64 KiB
	Size   int    // the whole line's length
	Reason string
}

// inbound is the message the read loop is handling: the wire line and its
// parts, kept raw. It is valid while the handler runs.
type inbound struct {
	at     time.Time
	line   []byte
	id     json.RawMessage
	method *string
	params json.RawMessage
}

// envelope is the shape shared by every JSON-RPC message.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method *string         `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// lineStream is a jsonrpc2.ObjectStream for newline-delimited JSON that
// keeps raw lines, never fails on junk, and has no small line cap.
type lineStream struct {
	r    *bufio.Reader
	w    io.WriteCloser
	wmu  sync.Mutex
	now  func() time.Time
	junk func(Junk)
	tap  func(out bool, at time.Time, line []byte)
	// notify handles notifications on the read goroutine, in order; they
	// never reach jsonrpc2, which has nothing to do for them.
	notify func(in inbound)
	// response, if set, is told of each response on the read goroutine
	// before jsonrpc2 gets it: what follows it on the wire is read after.
	response func(id json.RawMessage, at time.Time)

	// cur is the message being decoded by ReadObject.
	cur inbound

	// inflight holds the requests handed to jsonrpc2 without their params,
	// by the sequence number ReadObject gave each in the inboundField of
	// the slim request; the handler takes its own with take. Nothing
	// depends on when or on which goroutine jsonrpc2 calls the handler.
	mu       sync.Mutex
	inflight map[uint64]inbound
	seq      uint64
}

// inboundField names the extra member of a slim request that carries the
// sequence number of its inbound message.
const inboundField = "harness.inbound"

// keep stores a request for its handler and returns its number.
func (s *lineStream) keep(in inbound) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight == nil {
		s.inflight = map[uint64]inbound{}
	}
	s.seq++
	s.inflight[s.seq] = in
	return s.seq
}

// take returns (once) the inbound message of a request jsonrpc2 decoded
// from a slim request.
func (s *lineStream) take(req *jsonrpc2.Request) (inbound, bool) {
	for _, f := range req.ExtraFields {
		if f.Name != inboundField {
			continue
		}
		str, _ := f.Value.(string)
		n, err := strconv.ParseUint(str, 10, 64)
		if err != nil {
			return inbound{}, false
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		in, ok := s.inflight[n]
		delete(s.inflight, n)
		return in, ok
	}
	return inbound{}, false
}

func newLineStream(r io.Reader, w io.WriteCloser, now func() time.Time, junk func(Junk), tap func(bool, time.Time, []byte)) *lineStream {
	return &lineStream{r: bufio.NewReaderSize(r, 1<<16), w: w, now: now, junk: junk, tap: tap}
}

// ReadObject reads lines until one holds a JSON-RPC message and decodes it
// into v. Junk lines are reported and skipped. Requests and notifications
// reach jsonrpc2 without their params (the handler reads them raw from
// cur), which spares jsonrpc2 re-encoding large payloads.
func (s *lineStream) ReadObject(v any) error {
	for {
		line, err := s.readLine()
		at := s.now()
		if err != nil && len(line) == 0 {
			return err
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			if err != nil {
				return err
			}
			continue
		}
		line = append([]byte(nil), line...) // the reader's buffer is reused
		if s.tap != nil {
			s.tap(false, at, line)
		}
		notif, reason := s.decode(line, at, v)
		if reason != "" {
			s.reportJunk(at, line, reason)
		} else if notif {
			s.notify(s.cur)
		} else {
			if s.cur.method == nil && s.response != nil {
				s.response(s.cur.id, at)
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// decode fills s.cur from line and, unless the line is a notification, v;
// or it says why the line is junk.
func (s *lineStream) decode(line []byte, at time.Time, v any) (notif bool, junk string) {
	var env envelope
	if fastjson.Unmarshal(line, &env) != nil {
		// Junk is rare: the standard decoder has the last word, and says
		// what is wrong more clearly.
		env = envelope{}
		if err := json.Unmarshal(line, &env); err != nil {
			if line[0] != '{' {
				return false, "not a JSON-RPC message: " + shortErr(err)
			}
			return false, "malformed JSON-RPC message: " + shortErr(err)
		}
	}
	isReq := env.Method != nil
	isResp := env.Result != nil || env.Error != nil
	switch {
	case isReq && isResp:
		return false, "malformed JSON-RPC message: both method and result/error"
	case !isReq && !isResp:
		return false, "malformed JSON-RPC message: neither method nor result/error"
	}
	if isReq {
		if len(env.Params) > 0 && env.Params[0] != '{' && env.Params[0] != '[' && string(env.Params) != "null" {
			return false, "malformed JSON-RPC message: params is not an object"
		}
		s.cur = inbound{at: at, line: line, id: env.ID, method: env.Method, params: env.Params}
		// "id": null is a notification to jsonrpc2 as well.
		if len(env.ID) == 0 || string(env.ID) == "null" {
			return true, ""
		}
		seq := s.keep(s.cur)
		if err := json.Unmarshal(slimRequest(env.ID, *env.Method, seq), v); err != nil {
			s.take(&jsonrpc2.Request{ExtraFields: []jsonrpc2.RequestField{{Name: inboundField, Value: strconv.FormatUint(seq, 10)}}})
			return false, "malformed JSON-RPC request: " + shortErr(err)
		}
		return false, ""
	}
	if err := json.Unmarshal(line, v); err != nil {
		return false, "malformed JSON-RPC response: " + shortErr(err)
	}
	s.cur = inbound{at: at, line: line, id: env.ID}
	return false, ""
}

// slimRequest is the request jsonrpc2 gets: id and method, and the
// sequence number under which its params wait for the handler.
func slimRequest(id json.RawMessage, method string, seq uint64) []byte {
	m, _ := json.Marshal(method)
	b := make([]byte, 0, 80+len(id)+len(m))
	b = append(b, `{"jsonrpc":"2.0","`+inboundField+`":"`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `",`...)
	if len(id) > 0 {
		b = append(b, `"id":`...)
		b = append(b, id...)
		b = append(b, ',')
	}
	b = append(b, `"method":`...)
	b = append(b, m...)
	b = append(b, '}')
	return b
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

func (s *lineStream) reportJunk(at time.Time, line []byte, reason string) {
	if s.junk == nil {
		return
	}
	size := len(line)
	if len(line) > 64<<10 {
		line = line[:64<<10]
	}
	s.junk(Junk{At: at, Line: append([]byte(nil), line...), Size: size, Reason: reason})
}

// readLine returns the next line without its line ending. A line over
// MaxLineBytes is consumed whole and reported as junk.
func (s *lineStream) readLine() ([]byte, error) {
	line, size, cut, err := ReadLine(s.r, MaxLineBytes)
	if cut {
		s.reportJunk(s.now(), line[:min(len(line), 1024)], fmt.Sprintf("line longer than %d bytes", MaxLineBytes))
		return nil, err
	}
	if size == 0 {
		return nil, err
	}
	return line, err
}

// ReadLine reads one line from br, without its line ending. A line longer
// than limit is consumed whole: its first limit bytes come back, cut, with
// its full size. size is 0 only at the end of the input. A line that fits
// br's buffer is returned in place, valid until the next read: copy it to
// keep it.
func ReadLine(br *bufio.Reader, limit int) (line []byte, size int, cut bool, err error) {
	chunk, err := br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) && len(chunk) <= limit {
		return bytes.TrimRight(chunk, "\r\n"), len(chunk), false, err
	}
	size = len(chunk)
	line = append(line, chunk[:min(len(chunk), limit)]...)
	for errors.Is(err, bufio.ErrBufferFull) {
		chunk, err = br.ReadSlice('\n')
		size += len(chunk)
		if room := limit - len(line); room > 0 {
			line = append(line, chunk[:min(len(chunk), room)]...)
		}
	}
	n := size
	if err == nil {
		n-- // the newline
	}
	return bytes.TrimRight(line, "\r\n"), size, n > limit, err
}

// WriteObject writes v as one line.
func (s *lineStream) WriteObject(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.tap != nil {
		s.tap(true, s.now(), b[:len(b)-1])
	}
	_, err = s.w.Write(b)
	return err
}

// Close closes the agent's stdin.
func (s *lineStream) Close() error { return s.w.Close() }
