package view

import (
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"harness/report/assets"
	"harness/trials"
)

//go:embed page
var pageFS embed.FS

// CSP is the Content-Security-Policy of every response: scripts and styles
// from the server's own files only (no inline script, no eval), data
// fetched from the server only.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// ServerOptions configures the HTTP handler.
type ServerOptions struct {
	// Token, when set, must be given with every request: as ?token= (the
	// printed URL has it; the page then keeps it in a cookie) or in the
	// cookie.
	Token string
	// Loopback restricts the Host header to loopback names (against DNS
	// rebinding) when the server listens on a loopback address.
	Loopback bool
	// Seed and Resamples drive the bootstrap of comparisons.
	Seed      uint64
	Resamples int
}

// Server serves the viewer's page and its JSON API over an Index.
type Server struct {
	ix    *Index
	opt   ServerOptions
	steps *stepCache
	mux   *http.ServeMux
}

// NewServer returns the handler of the viewer over ix.
func NewServer(ix *Index, opt ServerOptions) *Server {
	if opt.Resamples == 0 {
		opt.Resamples = trials.DefaultResamples
	}
	if opt.Seed == 0 {
		opt.Seed = trials.DefaultSeed
	}
	s := &Server{ix: ix, opt: opt, steps: newStepCache(16), mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /{$}", s.page)
	s.mux.HandleFunc("GET /assets/{name}", s.asset)
	s.mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	s.mux.HandleFunc("GET /api/runs", s.apiRuns)
	s.mux.HandleFunc("GET /api/source", s.apiSource)
	s.mux.HandleFunc("GET /api/rows", s.apiRows)
	s.mux.HandleFunc("GET /api/trial", s.apiTrial)
	s.mux.HandleFunc("GET /api/artifact", s.apiArtifact)
	s.mux.HandleFunc("GET /api/steps", s.apiSteps)
	s.mux.HandleFunc("GET /api/compare", s.apiCompare)
	s.mux.HandleFunc("GET /api/diff", s.apiDiff)
	s.mux.HandleFunc("GET /api/events", s.apiEvents)
	return s
}

const tokenCookie = "harness_view_token"

// ServeHTTP checks the host and the token, sets the security headers and
// serves the request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	if s.opt.Loopback && !loopbackHost(r.Host) {
		http.Error(w, "harness view answers on 127.0.0.1 only (Host "+strconv.Quote(r.Host)+" refused)", http.StatusMisdirectedRequest)
		return
	}
	if s.opt.Token != "" {
		given := r.URL.Query().Get("token")
		if given == "" {
			if c, err := r.Cookie(tokenCookie); err == nil {
				given = c.Value
			}
		}
		if subtle.ConstantTimeCompare([]byte(given), []byte(s.opt.Token)) != 1 {
			http.Error(w, "a token is required: open the URL harness view printed", http.StatusUnauthorized)
			return
		}
		if r.URL.Query().Get("token") != "" {
			http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: s.opt.Token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		}
	}
	s.mux.ServeHTTP(w, r)
}

func loopbackHost(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	h = strings.Trim(h, "[]")
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	b, err := pageFS.ReadFile("page/index.html")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b)
}

// asset serves the page's files and the ones shared with harness report.
func (s *Server) asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var b []byte
	var err error
	if assets.Shared(name) {
		b, err = assets.FS.ReadFile(name)
	} else {
		b, err = fs.ReadFile(pageFS, "page/"+path.Base(name))
	}
	if err != nil || strings.HasSuffix(name, ".html") {
		http.NotFound(w, r)
		return
	}
	switch path.Ext(name) {
	case ".js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case ".css":
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	}
	w.Write(b)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	if err := enc.Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

func httpError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, errForbidden):
		code = http.StatusForbidden
	case errors.Is(err, errNotFound):
		code = http.StatusNotFound
	case errors.Is(err, errBadRequest):
		code = http.StatusBadRequest
	}
	http.Error(w, err.Error(), code)
}

var errBadRequest = errors.New("bad request")

// runView is a run in the runs list.
type runView struct {
	ID      string       `json:"id"`
	Name    string       `json:"name"`
	Dir     bool         `json:"dir"`
	Suite   string       `json:"suite,omitempty"`
	Started string       `json:"started,omitempty"`
	Ended   string       `json:"ended,omitempty"`
	Status  string       `json:"status"`
	K       int          `json:"k,omitempty"`
	Cases   int          `json:"cases,omitempty"`
	Sources []sourceView `json:"sources"`
	sortKey string
}

type sourceView struct {
	ID       string         `json:"src"`
	Name     string         `json:"name"`
	Agent    string         `json:"agent,omitempty"`
	Kind     string         `json:"kind,omitempty"`
	Totals   Totals         `json:"totals"`
	Progress []caseProgress `json:"inProgress,omitempty"`
	Problems []string       `json:"problems,omitempty"`
}

func (s *Server) sourceView(src *Source) sourceView {
	v := sourceView{ID: src.ID, Name: src.Name, Agent: src.agent, Kind: src.kind, Totals: src.totals(), Problems: src.problems()}
	if m := src.run.manifest; m != nil && m.K > 0 && m.Cases > 0 {
		v.Totals.Expected = m.K * m.Cases
		v.Totals.ExpectedCases = m.Cases
	}
	v.Progress = src.inProgress()
	return v
}

func (s *Server) apiRuns(w http.ResponseWriter, r *http.Request) {
	s.ix.mu.RLock()
	var out []runView
	for _, run := range s.ix.runs {
		v := runView{ID: run.ID, Name: run.Name, Dir: run.Dir != "", Status: run.status()}
		if m := run.manifest; m != nil {
			v.Suite, v.Started, v.Ended, v.K, v.Cases = m.Suite.Name, m.Started, m.Ended, m.K, m.Cases
		}
		var start int64
		for _, src := range run.Sources {
			sv := s.sourceView(src)
			if sv.Totals.Start > 0 && (start == 0 || sv.Totals.Start < start) {
				start = sv.Totals.Start
			}
			v.Sources = append(v.Sources, sv)
		}
		if v.Started == "" && start > 0 {
			v.Started = time.UnixMilli(start).UTC().Format(time.RFC3339)
		}
		v.sortKey = v.Started
		out = append(out, v)
	}
	scanned := s.ix.scanned
	s.ix.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].sortKey != out[j].sortKey {
			return out[i].sortKey > out[j].sortKey
		}
		return out[i].ID < out[j].ID
	})
	if out == nil {
		out = []runView{}
	}
	writeJSON(w, map[string]any{"runs": out, "roots": s.ix.Roots(), "scanned": scanned, "event": s.ix.events.last()})
}

// sourceDetail is the head of a run's grid.
type sourceDetail struct {
	sourceView
	Run        runRef              `json:"run"`
	Categories []string            `json:"categories"`
	Meta       map[string][]string `json:"meta"`
	Others     []runRef            `json:"others"`
}

type runRef struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Src    string `json:"src,omitempty"`
	Status string `json:"status,omitempty"`
}

// maxMetaValues bounds the values listed per metadata key.
const maxMetaValues = 200

func (s *Server) apiSource(w http.ResponseWriter, r *http.Request) {
	s.ix.mu.RLock()
	defer s.ix.mu.RUnlock()
	src, err := s.ix.lookup(r.URL.Query().Get("src"))
	if err != nil {
		httpError(w, err)
		return
	}
	d := sourceDetail{sourceView: s.sourceView(src), Run: runRef{ID: src.run.ID, Name: src.run.Name, Status: src.run.status()},
		Categories: []string{}, Meta: map[string][]string{}, Others: []runRef{}}
	cats := map[string]bool{}
	meta := map[string]map[string]bool{}
	for _, row := range src.rows {
		if row == nil {
			continue
		}
		if row.Category != "" {
			cats[row.Category] = true
		}
		for k, v := range row.Meta {
			if meta[k] == nil {
				meta[k] = map[string]bool{}
			}
			values := []string{v}
			if items, ok := row.metaItems[k]; ok {
				values = items // a list (tags): each item is a value
			}
			for _, x := range values {
				if len(meta[k]) < maxMetaValues {
					meta[k][x] = true
				}
			}
		}
	}
	for c := range cats {
		d.Categories = append(d.Categories, c)
	}
	sort.Strings(d.Categories)
	for k, vs := range meta {
		for v := range vs {
			d.Meta[k] = append(d.Meta[k], v)
		}
		sort.Strings(d.Meta[k])
	}
	for _, other := range s.ix.sources {
		if other != src {
			d.Others = append(d.Others, runRef{ID: other.run.ID, Name: other.run.Name + " · " + other.Name, Src: other.ID})
		}
	}
	sort.Slice(d.Others, func(i, j int) bool { return d.Others[i].Src < d.Others[j].Src })
	writeJSON(w, d)
}

func (s *Server) apiRows(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.Query())
	if err != nil {
		httpError(w, fmt.Errorf("%w: %v", errBadRequest, err))
		return
	}
	s.ix.mu.RLock()
	defer s.ix.mu.RUnlock()
	src, err := s.ix.lookup(r.URL.Query().Get("src"))
	if err != nil {
		httpError(w, err)
		return
	}
	var other *Source
	if q.Changed != "" {
		if other, err = s.ix.lookup(q.Changed); err != nil {
			httpError(w, err)
			return
		}
	}
	writeJSON(w, src.query(q, other))
}

// row finds the row of a trial; ix.mu is held.
func (s *Server) row(r *http.Request, prefix string) (*Source, *Row, error) {
	v := r.URL.Query()
	src, err := s.ix.lookup(v.Get(prefix + "src"))
	if err != nil {
		return nil, nil, err
	}
	trial, err := strconv.Atoi(v.Get(prefix + "trial"))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %strial=%q: want a trial number", errBadRequest, prefix, v.Get(prefix+"trial"))
	}
	id := v.Get(prefix + "id")
	i, ok := src.byKey[unitKey{id, trial}]
	if !ok || src.rows[i] == nil {
		return nil, nil, fmt.Errorf("%w: %s has no trial %d of case %q", errNotFound, src.ID, trial, id)
	}
	return src, src.rows[i], nil
}

// trialDetail is what the trial view loads first.
type trialDetail struct {
	Source string          `json:"src"`
	Row    GridRow         `json:"row"`
	Record json.RawMessage `json:"record"`
	Steps  int             `json:"steps"`
	// Trials are the case's trials in this source: number and status.
	Trials []trialRef `json:"trials"`
	// ArtifactFiles are the files of the trial's artifacts that
	// /api/artifact serves (relative to its artifacts directory).
	ArtifactFiles []string `json:"artifactFiles,omitempty"`
}

type trialRef struct {
	Trial  int    `json:"trial"`
	Status string `json:"status"`
}

func (s *Server) apiTrial(w http.ResponseWriter, r *http.Request) {
	s.ix.mu.RLock()
	src, row, err := s.row(r, "")
	var d trialDetail
	if err == nil {
		a := src.caseAggs()[row.ID]
		d = trialDetail{Source: src.ID, Row: GridRow{Row: row}}
		if a != nil {
			d.Row.CaseStatus, d.Row.CaseN, d.Row.CaseC = a.status, a.N, a.C
			for _, t := range a.rows {
				d.Trials = append(d.Trials, trialRef{t.Trial, t.Status})
			}
		}
	}
	s.ix.mu.RUnlock()
	if err != nil {
		httpError(w, err)
		return
	}
	rec, err := s.record(row)
	if err != nil {
		httpError(w, err)
		return
	}
	b, err := json.Marshal((*plainRecord)(rec.Record))
	if err != nil {
		httpError(w, err)
		return
	}
	d.Record, d.Steps = b, len(rec.steps)
	d.ArtifactFiles = artifactFiles(src, rec.Record.Artifacts)
	writeJSON(w, d)
}

// record reads a trial's record, its step locations from the cache when
// they are there.
func (s *Server) record(row *Row) (*record, error) {
	refs, ok := s.steps.get(row.loc)
	rec, err := readRecord(row, !ok)
	if err != nil {
		return nil, err
	}
	if ok {
		rec.steps = refs
	} else {
		s.steps.put(row.loc, rec.steps)
	}
	return rec, nil
}

// stepRefs returns a trial's step locations.
func (s *Server) stepRefs(row *Row) ([]stepRef, error) {
	if refs, ok := s.steps.get(row.loc); ok {
		return refs, nil
	}
	rec, err := s.record(row)
	if err != nil {
		return nil, err
	}
	return rec.steps, nil
}

// maxSteps bounds a page of steps.
const maxSteps = 1000

func (s *Server) apiSteps(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	from, _ := strconv.Atoi(v.Get("from"))
	limit, _ := strconv.Atoi(v.Get("limit"))
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, maxSteps)
	s.ix.mu.RLock()
	_, row, err := s.row(r, "")
	s.ix.mu.RUnlock()
	if err != nil {
		httpError(w, err)
		return
	}
	refs, err := s.stepRefs(row)
	if err != nil {
		httpError(w, err)
		return
	}
	from = max(0, min(from, len(refs)))
	end := min(len(refs), from+limit)
	steps, err := readSteps(row.loc.file, refs[from:end])
	if err != nil {
		httpError(w, err)
		return
	}
	writeJSON(w, map[string]any{"total": len(refs), "from": from, "steps": steps})
}

func (s *Server) apiCompare(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	ids := v["src"]
	if len(ids) < 2 {
		httpError(w, fmt.Errorf("%w: compare wants two sources or more (src=A&src=B)", errBadRequest))
		return
	}
	k := 1
	if s := v.Get("k"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 1 {
			k = n
		}
	}
	s.ix.mu.RLock()
	defer s.ix.mu.RUnlock()
	var srcs []*Source
	for _, id := range ids {
		src, err := s.ix.lookup(id)
		if err != nil {
			httpError(w, err)
			return
		}
		srcs = append(srcs, src)
	}
	writeJSON(w, compare(srcs, k, s.opt.Seed, s.opt.Resamples))
}

// apiDiff finds the first step where two trials' trajectories differ.
func (s *Server) apiDiff(w http.ResponseWriter, r *http.Request) {
	s.ix.mu.RLock()
	_, ra, err := s.row(r, "a.")
	var rb *Row
	if err == nil {
		_, rb, err = s.row(r, "b.")
	}
	s.ix.mu.RUnlock()
	if err != nil {
		httpError(w, err)
		return
	}
	sa, err := s.stepRefs(ra)
	if err != nil {
		httpError(w, err)
		return
	}
	sb, err := s.stepRefs(rb)
	if err != nil {
		httpError(w, err)
		return
	}
	first := -1
	const page = 500
	for i := 0; first < 0 && i < max(len(sa), len(sb)); i += page {
		ea, eb := min(len(sa), i+page), min(len(sb), i+page)
		var pa, pb []json.RawMessage
		if i < ea {
			if pa, err = readSteps(ra.loc.file, sa[i:ea]); err != nil {
				httpError(w, err)
				return
			}
		}
		if i < eb {
			if pb, err = readSteps(rb.loc.file, sb[i:eb]); err != nil {
				httpError(w, err)
				return
			}
		}
		for j := 0; j < max(len(pa), len(pb)); j++ {
			if j >= len(pa) || j >= len(pb) || signature(pa[j]) != signature(pb[j]) {
				first = i + j
				break
			}
		}
	}
	writeJSON(w, map[string]any{"first": first, "a": len(sa), "b": len(sb)})
}

// apiEvents streams the index's events as Server-Sent Events. A page that
// reconnects sends Last-Event-ID and gets the events after it, no more, no
// fewer; one that fell too far behind gets a "reload" event.
func (s *Server) apiEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	var last uint64
	lastSet := false
	for _, v := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("last")} {
		if v == "" {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			http.Error(w, "Last-Event-ID: want a number", http.StatusBadRequest)
			return
		}
		last, lastSet = n, true
		break
	}
	if !lastSet {
		last = s.ix.events.last()
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "retry: 1000\n: start %d\n\n", last)
	fl.Flush()
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		evs, wake, lost := s.ix.events.since(last)
		if lost {
			fmt.Fprintf(w, "event: reload\ndata: {}\n\n")
		}
		for _, ev := range evs {
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.ID, ev.Type, ev.Data)
			last = ev.ID
		}
		if len(evs) > 0 || lost {
			fl.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-wake:
		case <-ping.C:
			fmt.Fprintf(w, ": ping\n\n")
			fl.Flush()
		}
	}
}
