package termprogress

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"harness/image/pull"
)

const (
	mb    = 1_000_000
	refA  = "registry.example:5000/tasks/edit:v1"
	refB  = "registry.example:5000/tasks/idle:v1"
	total = 90 * mb
)

// pullSession plays two images pulled side by side: A's two layers with
// its bytes coming in between, B's first layer, a retry of B's, then B
// stored, A pulled. The clock moves 50 ms an event.
func pullSession(p *Pulls) {
	ev := func(ref string, layer int, bytes, fetched int64, fetching bool) {
		p.Progress(pull.Progress{Ref: ref, Layer: layer, Layers: 2, Bytes: bytes, Total: total, Fetched: fetched, Fetching: fetching})
	}
	ev(refA, 0, 0, 0, false)
	ev(refA, 1, 1*mb, 1*mb, true)
	ev(refA, 1, 2*mb, 2*mb, true)
	ev(refA, 1, 3*mb, 3*mb, true)
	ev(refB, 0, 0, 0, false)
	ev(refA, 1, 60*mb, 60*mb, false)
	ev(refA, 2, 61*mb, 61*mb, true)
	ev(refB, 1, 45*mb, 0, false)
	p.Retry(refB, 1500*time.Millisecond, "registry answered 429")
	ev(refA, 2, total, total, false)
	p.Done(refB, nil)
	p.Done(refA, &pull.Progress{Layers: 2, Fetched: total, Total: total})
	p.Close()
}

// fakeClock moves 50 ms each time it is read.
func fakeClock() func() time.Time {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time {
		t = t.Add(50 * time.Millisecond)
		return t
	}
}

// TestGoldenPullsLog pins the pulls in a log: a line per layer done, the
// retry's line and the image pulled, no status line and nothing for the
// bytes of a layer in flight.
func TestGoldenPullsLog(t *testing.T) {
	var buf bytes.Buffer
	pullSession(NewPulls(&buf, PullSettings{Now: fakeClock()}))
	if strings.ContainsAny(buf.String(), "\r\033") {
		t.Errorf("a log has terminal controls: %q", buf.String())
	}
	golden(t, "pulls_log.golden", buf.String())
}

// TestGoldenPullsTerminal pins the pulls on a terminal, with {clear} for
// the erasing of the status line: no line per layer; the status line
// with each image's bytes and layers, redrawn for the bytes at most
// every 100 ms; the retry's and the pulled image's lines above it; and
// nothing left of it at the end.
func TestGoldenPullsTerminal(t *testing.T) {
	var buf bytes.Buffer
	pullSession(NewPulls(&buf, PullSettings{Terminal: true, Width: 200, Now: fakeClock()}))
	out := buf.String()
	if strings.Contains(out, "layer 1/2") {
		t.Errorf("a terminal has a line per layer: %q", out)
	}
	if strings.LastIndex(out, "\r\033[K") < strings.LastIndex(out, "pulling images:") {
		t.Errorf("the status line is left on the screen: %q", out)
	}
	golden(t, "pulls_terminal.golden", strings.ReplaceAll(out, "\r\033[K", "{clear}\n"))
}

// The status line says, per image in flight, the bytes done of its
// total and its layers done, and is cut to the terminal's width.
func TestPullsStatusLine(t *testing.T) {
	var buf bytes.Buffer
	p := NewPulls(&buf, PullSettings{Terminal: true, Width: 200, Now: fakeClock()})
	p.Progress(pull.Progress{Ref: refA, Layer: 1, Layers: 3, Bytes: 12 * mb, Total: 48 * mb})
	p.Progress(pull.Progress{Ref: refB, Layer: 1, Layers: 2, Bytes: 5 * mb, Total: 10 * mb, Fetching: true})
	p.Done("other", nil)
	want := "pulling images: 1 done, 2 in flight | edit:v1 12.0 MB/48.0 MB, layers 1/3 | idle:v1 5.0 MB/10.0 MB, layers 0/2"
	if got := p.statusLine(); got != want {
		t.Errorf("status line\n%q, want\n%q", got, want)
	}
	p.settings.Width = 40
	if got := p.statusLine(); got != want[:38]+"…" {
		t.Errorf("cut to 40 columns: %q", got)
	}
}

// Bytes in flight redraw the status line at most every Every; a layer
// done redraws it at once.
func TestPullsRedrawThrottled(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := NewPulls(&buf, PullSettings{Terminal: true, Every: time.Second, Now: func() time.Time { return now }})
	draws := func() int { return strings.Count(buf.String(), "pulling images:") }
	p.Progress(pull.Progress{Ref: refA, Layers: 2, Total: total})
	for i := 1; i <= 5; i++ {
		now = now.Add(100 * time.Millisecond)
		p.Progress(pull.Progress{Ref: refA, Layer: 1, Layers: 2, Bytes: int64(i) * mb, Total: total, Fetching: true})
	}
	if n := draws(); n != 1 {
		t.Fatalf("%d draws within a second, want 1 (the first)", n)
	}
	now = now.Add(time.Second)
	p.Progress(pull.Progress{Ref: refA, Layer: 1, Layers: 2, Bytes: 6 * mb, Total: total, Fetching: true})
	p.Progress(pull.Progress{Ref: refA, Layer: 1, Layers: 2, Bytes: 45 * mb, Total: total})
	if n := draws(); n != 3 {
		t.Fatalf("%d draws, want 3: a second later, and the layer done", n)
	}
}
