package termprogress

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"harness/image"
	"harness/image/pull"
)

// PullSettings say how Pulls shows the pulls.
type PullSettings struct {
	// Terminal says the writer is a terminal: one status line is kept
	// under the lines and redrawn as the bytes come, instead of a line per
	// layer.
	Terminal bool
	// Width is the terminal's width in columns: the status line is cut
	// to fit (0 = 80).
	Width int
	// Every is the least time between two redraws of the status line for
	// the bytes of a layer in flight (0 = 100 ms); a layer done always
	// redraws it.
	Every time.Duration
	// Now is the clock of the redraws (nil = time.Now).
	Now func() time.Time
}

// Pulls shows the images a run pulls before its first agent starts. On a
// terminal a live status line says, for each image in flight, the bytes
// done of its total and its layers done; in a log, each layer done has a
// line ("pull REF: layer 2/3, 80.1 MB of 120.4 MB"). Either way each
// image pulled ends with a line ("pulled REF: 3 layers, 120.4 MB fetched
// of 120.4 MB"), and each wait before a retry has one. Its methods may be
// called from any goroutine.
type Pulls struct {
	w        io.Writer
	settings PullSettings

	mu       sync.Mutex
	inFlight []*pulling // in the order they started
	done     int        // images done (pulled, found stored, or failed)
	drawn    bool       // the status line is on the screen
	last     time.Time  // when it was drawn
}

// pulling is an image in flight.
type pulling struct {
	ref                string
	layers, layersDone int
	bytes, total       int64
}

// NewPulls shows the pulls on w.
func NewPulls(w io.Writer, s PullSettings) *Pulls {
	if s.Width <= 0 {
		s.Width = 80
	}
	if s.Every <= 0 {
		s.Every = 100 * time.Millisecond
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	return &Pulls{w: w, settings: s}
}

// Progress shows an event of a pull.
func (p *Pulls) Progress(e pull.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.state(e.Ref)
	st.layers, st.total, st.bytes = e.Layers, e.Total, e.Bytes
	if !e.Fetching && e.Layer > 0 {
		st.layersDone = e.Layer
	}
	if !p.settings.Terminal {
		if !e.Fetching && e.Layer > 0 {
			fmt.Fprintf(p.w, "pull %s: layer %d/%d, %s of %s\n", e.Ref, e.Layer, e.Layers, image.Bytes(e.Bytes), image.Bytes(e.Total))
		}
		return
	}
	if e.Fetching && p.drawn && p.settings.Now().Sub(p.last) < p.settings.Every {
		return
	}
	p.draw()
}

// Retry shows the wait before a pull's next try.
func (p *Pulls) Retry(ref string, wait time.Duration, why string) {
	p.line(fmt.Sprintf("pull %s: %s; trying again in %s", ref, why, wait.Round(time.Millisecond)))
}

// Done takes an image out of the status line: pulled, when it was pulled
// now, says so in a line with its layers and the bytes fetched of its
// total (a Progress of the image's last layer).
func (p *Pulls) Done(ref string, pulled *pull.Progress) {
	p.mu.Lock()
	for i, st := range p.inFlight {
		if st.ref == ref {
			p.inFlight = append(p.inFlight[:i], p.inFlight[i+1:]...)
			break
		}
	}
	p.done++
	p.mu.Unlock()
	if pulled != nil {
		p.line(fmt.Sprintf("pulled %s: %d layers, %s fetched of %s", ref, pulled.Layers, image.Bytes(pulled.Fetched), image.Bytes(pulled.Total)))
		return
	}
	p.mu.Lock()
	p.draw()
	p.mu.Unlock()
}

// Close erases the status line.
func (p *Pulls) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
}

// line writes a line above the status line.
func (p *Pulls) line(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	fmt.Fprintln(p.w, s)
	p.draw()
}

// state is ref's image in flight, added when it is new.
func (p *Pulls) state(ref string) *pulling {
	for _, st := range p.inFlight {
		if st.ref == ref {
			return st
		}
	}
	st := &pulling{ref: ref}
	p.inFlight = append(p.inFlight, st)
	return st
}

// draw redraws the status line on a terminal (nothing when no image is
// in flight).
func (p *Pulls) draw() {
	if !p.settings.Terminal {
		return
	}
	if len(p.inFlight) == 0 {
		p.clear()
		return
	}
	fmt.Fprint(p.w, "\r\033[K"+p.statusLine())
	p.drawn, p.last = true, p.settings.Now()
}

// clear erases the status line.
func (p *Pulls) clear() {
	if p.settings.Terminal && p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}

// statusLine is the live line: the images done, then each in flight with
// its bytes and layers done, cut to the terminal's width.
func (p *Pulls) statusLine() string {
	parts := []string{fmt.Sprintf("pulling images: %d done, %d in flight", p.done, len(p.inFlight))}
	for _, st := range p.inFlight {
		parts = append(parts, fmt.Sprintf("%s %s/%s, layers %d/%d", shortRef(st.ref), image.Bytes(st.bytes), image.Bytes(st.total), st.layersDone, st.layers))
	}
	return cut(strings.Join(parts, " | "), p.settings.Width-1)
}

// shortRef is a reference without its registry host: the repository's
// last name and the tag or digest.
func shortRef(ref string) string {
	if i := strings.LastIndex(ref, "/"); i >= 0 {
		return ref[i+1:]
	}
	return ref
}

// cut shortens s to at most n runes, ending in "…" when it was cut.
func cut(s string, n int) string {
	if n < 1 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
