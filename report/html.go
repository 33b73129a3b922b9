package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"harness/cost"
	"harness/report/assets"
	"harness/results"
	"harness/schemas"
	"harness/trials"
)

// The page's template, styles and script; the transcript renderer and its
// styles are shared with harness view.
var (
	pageTemplate = assets.Text("report.html.tmpl")
	pageCSS      = assets.Text("transcript.css") + assets.Text("report.css")
	pageJS       = assets.Text("transcript.js") + "\n" + assets.Text("report.js")
)

// Options controls WriteHTML.
type Options struct {
	// Title heads the page (default: "harness report: " and the run names).
	Title string
	// Seed and Resamples drive the bootstrap intervals of the summary
	// (defaults trials.DefaultSeed and trials.DefaultResamples when
	// Resamples is 0; a negative Resamples disables the bootstrap).
	Seed      uint64
	Resamples int
	// Generated is the time printed as the report's date (zero: none, which
	// keeps the output reproducible).
	Generated time.Time
	// Gates are the comparison gates decided for the runs, shown first.
	Gates []trials.RegressionVerdict
	// Stopped, when not empty, says what stopped the run early and what
	// did not run, shown first.
	Stopped string
	// Dir is the directory the page is written to ("" when unknown, or
	// not a file): a run's trial artifacts are linked, relatively, when
	// the run's artifacts directory (results.ArtifactsDir of its results
	// file) is in it.
	Dir string
}

func (o Options) resamples() int {
	switch {
	case o.Resamples == 0:
		return trials.DefaultResamples
	case o.Resamples < 0:
		return 0
	}
	return o.Resamples
}

// MaxRuns is how many runs one report holds side by side (two get the
// A → B comparison as well).
const MaxRuns = 8

// WriteHTML writes one self-contained HTML page for one run, or for two
// runs side by side (A and B, in that order). The page needs nothing from
// the network: its CSS, JavaScript and SVG are inline. The summary table,
// the curves and the lists of flaky and failing cases are HTML; the case
// list is rendered by the page's script from an embedded JSON index (only
// the rows in view are in the DOM), and a case's trajectories are parsed
// from embedded JSON chunks and rendered when the case is opened. Runs read
// without RunOptions.Details get no trajectories.
func WriteHTML(w io.Writer, opt Options, runs ...*Run) error {
	if len(runs) == 0 || len(runs) > MaxRuns {
		return fmt.Errorf("report: want 1 to %d runs, got %d", MaxRuns, len(runs))
	}
	t, err := template.New("page").Funcs(template.FuncMap{
		"pct":  pct,
		"num":  func(f float64) string { return strconv.FormatFloat(f, 'f', 3, 64) },
		"ms":   fmtMS,
		"join": strings.Join,
	}).Parse(pageTemplate)
	if err != nil {
		return fmt.Errorf("report: template: %w", err)
	}
	page := buildPage(opt, runs)
	idx, err := safeJSON(buildIndex(runs, opt.Dir))
	if err != nil {
		return fmt.Errorf("report: index: %w", err)
	}
	bw := &errWriter{w: w}
	if err := t.ExecuteTemplate(bw, "top", page); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	bw.str(`<script type="application/json" id="report-index">`)
	bw.bytes(idx)
	bw.str("</script>\n")
	for ri, r := range runs {
		if r.spool == nil {
			continue
		}
		err := r.spool.chunks(func(i int, cr io.Reader) error {
			fmt.Fprintf(bw, `<script type="application/json" class="trial-data" id="trials-%d-%d">[`, ri, i)
			if _, err := io.Copy(bw, cr); err != nil {
				return fmt.Errorf("report %s: spool: %w", r.Name, err)
			}
			bw.str("]</script>\n")
			return bw.err
		})
		if err != nil {
			return err
		}
	}
	if bw.err != nil {
		return fmt.Errorf("report: write: %w", bw.err)
	}
	if err := t.ExecuteTemplate(bw, "bottom", page); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if bw.err != nil {
		return fmt.Errorf("report: write: %w", bw.err)
	}
	return nil
}

// errWriter remembers the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) str(s string)   { io.WriteString(e, s) }
func (e *errWriter) bytes(b []byte) { e.Write(b) }

// safeJSON marshals v for a <script type="application/json"> block: every
// "<" is written as \u003c (also inside raw JSON kept from the agent), so no
// "</script>" or "<!--" can end or confuse the block.
func safeJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if bytes.IndexByte(b, '<') >= 0 {
		b = bytes.ReplaceAll(b, []byte("<"), []byte(`\u003c`))
	}
	return b, nil
}

// page is what the template renders.
type page struct {
	Title     string
	Generated string
	CSS       template.CSS
	JS        template.JS
	Runs      []runView
	Compare   *compareView
	// AnyGraderErrors says some run had trials with grader errors.
	AnyGraderErrors bool
	Curves          []chart
	Statuses        []string
	Gates           []trials.RegressionVerdict
	GatesFailed     int
	Stopped         string
}

type runView struct {
	Label, Name, Kind              string
	Agent, Harness, Graders        string
	Started, Wall                  string
	Cases, Trials, Graded, Passes  int
	ScoredCases, GraderErrors      int
	Unscored                       string
	Ungraded, Missing, ErrorTrials int
	PassRate, PassRateCI           string
	// Method names how the intervals of the run's summary are had.
	Method                               string
	Cost                                 string
	K                                    int
	PassAtK, PassExpK                    string
	StatusCounts                         []statusCount
	ErrorClasses                         []classCount
	Flaky, Failing, Errored              []caseRef
	Warnings                             []string
	HasDetails                           bool
	PassAtRows                           []curveRow
	Summary                              schemas.TrialsSummary
	FlakyMore, FailingMore, ErroredMore  int
	FlakyTotal, FailingTotal, ErrorTotal int
	// Coverage says what the pass rate is over, and the agent's own
	// failures in it.
	Coverage string
}

type statusCount struct {
	Status string
	Count  int
}

type classCount struct {
	Class string
	Count int
}

type caseRef struct {
	ID, Category, Note string
	N, C               int
}

type curveRow struct {
	K           int
	At, Exp     float64
	AtCI, ExpCI string
	Cases       int
	Asked       bool
}

type compareView struct {
	A, B               string
	Both, OnlyA, OnlyB int
	Gained, Lost, Same int
	// Changed counts the cases whose content differs between the runs.
	Changed                int
	GainedCases, LostCases []caseRef
	GainedMore, LostMore   int
	StatusTable            [][]int // [status of A][status of B]
	StatusNames            []string
}

const listLimit = 50

func buildPage(opt Options, runs []*Run) page {
	p := page{
		Title:    opt.Title,
		CSS:      template.CSS(pageCSS),
		JS:       template.JS(pageJS),
		Statuses: []string{StatusPass, StatusFail, StatusFlaky, StatusError, StatusUngraded},
		Gates:    opt.Gates,
		Stopped:  opt.Stopped,
	}
	for _, v := range opt.Gates {
		if v.Failed {
			p.GatesFailed++
		}
	}
	if !opt.Generated.IsZero() {
		p.Generated = opt.Generated.UTC().Format("2006-01-02 15:04 UTC")
	}
	var names []string
	for _, r := range runs {
		names = append(names, filepath.Base(r.Name))
	}
	if p.Title == "" {
		p.Title = "harness report: " + strings.Join(names, " vs ")
	}
	var series [][]schemas.Estimate
	var expSeries [][]schemas.Estimate
	var labels []string
	for i, r := range runs {
		v := buildRunView(r, runLabel(i, len(runs)), opt)
		p.Runs = append(p.Runs, v)
		p.AnyGraderErrors = p.AnyGraderErrors || v.GraderErrors > 0
		labels = append(labels, v.Label)
		series = append(series, curve(v.Summary.PassAt))
		expSeries = append(expSeries, curve(v.Summary.PassExp))
	}
	p.Curves = []chart{
		buildChart("pass@k", "passAt", "probability that at least one of k trials passes", labels, series),
		buildChart("pass^k", "passExp", "probability that all k trials pass", labels, expSeries),
	}
	if len(runs) == 2 {
		p.Compare = buildCompare(runs[0], runs[1])
	}
	return p
}

func runLabel(i, n int) string {
	if n == 1 {
		return "run"
	}
	return string(rune('A' + i))
}

func buildRunView(r *Run, label string, opt Options) runView {
	sum := r.Summary(opt.Seed, opt.resamples())
	v := runView{
		Label: label, Name: r.Name, Kind: r.Kind,
		Harness: r.Harness, Graders: strings.Join(r.Graders, ", "),
		Cases: sum.Cases, Trials: sum.Trials, Graded: sum.Graded, Passes: sum.Passes,
		ScoredCases: sum.ScoredCases, GraderErrors: trials.GraderErrors(sum), Unscored: strings.Join(sum.UnscoredCases, ", "),
		Ungraded: sum.Ungraded, Missing: sum.Missing, K: sum.K,
		Warnings: sum.Warnings, HasDetails: r.HasDetails(), Summary: sum,
		PassRate: "n/a", PassRateCI: "", PassAtK: "n/a", PassExpK: "n/a",
	}
	v.Agent = r.Agent
	if r.AgentVersion != "" {
		v.Agent += " " + r.AgentVersion
	}
	if r.Start > 0 {
		v.Started = time.UnixMilli(r.Start).UTC().Format("2006-01-02 15:04:05 UTC")
		if r.End > r.Start {
			v.Wall = fmtMS(float64(r.End - r.Start))
		}
	}
	if sum.Cost != nil {
		v.Cost = cost.Format(sum.Cost)
	}
	all := trials.CountsOf(sum)
	v.Coverage = all.Coverage()
	if len(all.Failures) > 0 {
		v.Coverage += "; failed by the agent: " + trials.ClassCounts(all.Failures)
	}
	if all.Attempts > 0 {
		v.Coverage += "; " + all.RetryNote()
	}
	if sum.PassRate != nil {
		v.PassRate = pct(*sum.PassRate)
		if sum.PassRateCI != nil {
			v.PassRateCI = trials.FormatInterval(sum.PassRateCI.Low, sum.PassRateCI.High, sum.PassRateCI.Method, pct)
		}
	}
	if e := sum.PassAtK; e != nil {
		v.PassAtK = pct(e.Mean) + " " + trials.FormatInterval(e.Low, e.High, e.Method, pct)
	}
	if e := sum.PassExpK; e != nil {
		v.PassExpK = pct(e.Mean) + " " + trials.FormatInterval(e.Low, e.High, e.Method, pct)
	}
	v.Method = trials.MethodNote(sum.Confidence, sum.Resamples, sum.Seed)
	for _, class := range slices.Sorted(maps.Keys(sum.Errors)) {
		v.ErrorClasses = append(v.ErrorClasses, classCount{class, sum.Errors[class]})
		v.ErrorTrials += sum.Errors[class]
	}
	counts := map[string]int{}
	for _, c := range r.Cases {
		st := c.Status()
		counts[st]++
		ref := caseRef{ID: c.ID, Category: c.Category, N: c.Count.N, C: c.Count.C}
		switch st {
		case StatusFlaky:
			v.FlakyTotal++
			if len(v.Flaky) < listLimit {
				v.Flaky = append(v.Flaky, ref)
			}
		case StatusFail:
			v.FailingTotal++
			if len(v.Failing) < listLimit {
				ref.Note = firstReason(c, StatusFail)
				v.Failing = append(v.Failing, ref)
			}
		case StatusError:
			v.ErrorTotal++
			if len(v.Errored) < listLimit {
				ref.Note = classList(c.Count.Errors)
				if m := firstErrorMessage(c); m != "" {
					ref.Note += ": " + m
				}
				v.Errored = append(v.Errored, ref)
			}
		}
	}
	v.FlakyMore, v.FailingMore, v.ErroredMore = v.FlakyTotal-len(v.Flaky), v.FailingTotal-len(v.Failing), v.ErrorTotal-len(v.Errored)
	for _, st := range []string{StatusPass, StatusFail, StatusFlaky, StatusError, StatusUngraded} {
		v.StatusCounts = append(v.StatusCounts, statusCount{st, counts[st]})
	}
	at, exp := curve(sum.PassAt), curve(sum.PassExp)
	for i := range at {
		v.PassAtRows = append(v.PassAtRows, curveRow{
			K: at[i].K, At: at[i].Mean, AtCI: trials.FormatInterval(at[i].Low, at[i].High, at[i].Method, pct),
			Exp: exp[i].Mean, ExpCI: trials.FormatInterval(exp[i].Low, exp[i].High, exp[i].Method, pct),
			Cases: at[i].Cases, Asked: at[i].K == sum.K,
		})
	}
	return v
}

// firstReason is the grader reasoning of the case's first trial with the
// given status.
func firstReason(c *Case, status string) string {
	for _, t := range c.Trials {
		if t.Status == status && t.Reasoning != "" {
			return shorten(oneLine(t.Reasoning), 200)
		}
	}
	return ""
}

// firstFailedCheck is the first failed check of the case's trials with
// the given status, as "text: reason" ("" when none).
func firstFailedCheck(c *Case, status string) string {
	for _, t := range c.Trials {
		if t.Status != status {
			continue
		}
		for _, ch := range t.Checks {
			if !ch.Pass {
				s := ch.Text
				if ch.Reason != "" {
					s += ": " + ch.Reason
				}
				return shorten(oneLine(s), 200)
			}
		}
	}
	return ""
}

func firstErrorMessage(c *Case) string {
	for _, t := range c.Trials {
		if t.Error != nil && t.Error.Message != "" {
			return shorten(oneLine(t.Error.Message), 200)
		}
	}
	return ""
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func classList(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// curve returns the points of a summary curve in k order.
func curve(m map[string]schemas.Estimate) []schemas.Estimate {
	out := make([]schemas.Estimate, 0, len(m))
	for k := 1; ; k++ {
		e, ok := m[strconv.Itoa(k)]
		if !ok {
			break
		}
		out = append(out, e)
	}
	return out
}

// outcome is a case's verdict for comparisons, the rule harness compare
// uses: "pass" when a strict majority of its graded trials passed, "fail"
// otherwise, "" when it has no graded trial.
func outcome(c *Case) string {
	if c == nil || c.Count.N == 0 {
		return ""
	}
	if 2*c.Count.C > c.Count.N {
		return StatusPass
	}
	return StatusFail
}

// change classifies a case from run A to run B: gained, lost, same,
// no-verdict (no graded trial in one of the runs), only-a, only-b, or
// case-changed (the case itself differs: its records' content hashes).
func change(a, b *Case) string {
	switch {
	case a == nil:
		return "only-b"
	case b == nil:
		return "only-a"
	case a.Count.Hash != "" && b.Count.Hash != "" && a.Count.Hash != b.Count.Hash:
		return "case-changed"
	}
	oa, ob := outcome(a), outcome(b)
	switch {
	case oa == "" || ob == "":
		return "no-verdict"
	case oa == ob:
		return "same"
	case ob == StatusPass:
		return "gained"
	}
	return "lost"
}

func buildCompare(a, b *Run) *compareView {
	cv := &compareView{A: a.Name, B: b.Name,
		StatusNames: []string{StatusPass, StatusFail, StatusFlaky, StatusError, StatusUngraded}}
	pos := map[string]int{}
	for i, s := range cv.StatusNames {
		pos[s] = i
	}
	cv.StatusTable = make([][]int, len(cv.StatusNames))
	for i := range cv.StatusTable {
		cv.StatusTable[i] = make([]int, len(cv.StatusNames))
	}
	for _, ca := range a.Cases {
		cb := b.Case(ca.ID)
		if cb == nil {
			cv.OnlyA++
			continue
		}
		cv.Both++
		cv.StatusTable[pos[ca.Status()]][pos[cb.Status()]]++
		ref := caseRef{ID: ca.ID, Category: ca.Category,
			Note: fmt.Sprintf("A %d/%d → B %d/%d", ca.Count.C, ca.Count.N, cb.Count.C, cb.Count.N)}
		switch change(ca, cb) {
		case "gained":
			cv.Gained++
			if len(cv.GainedCases) < listLimit {
				cv.GainedCases = append(cv.GainedCases, ref)
			}
		case "lost":
			cv.Lost++
			if len(cv.LostCases) < listLimit {
				cv.LostCases = append(cv.LostCases, ref)
			}
		case "same":
			cv.Same++
		case "case-changed":
			cv.Changed++
		}
	}
	for _, cb := range b.Cases {
		if a.Case(cb.ID) == nil {
			cv.OnlyB++
		}
	}
	cv.GainedMore, cv.LostMore = cv.Gained-len(cv.GainedCases), cv.Lost-len(cv.LostCases)
	return cv
}

// The index is the JSON the page's script reads at load: every case, with
// per run its status and per trial its verdict and where its full record
// is. Field names are short: a 10,000-trial run has one entry per trial.
type index struct {
	Runs       []indexRun  `json:"runs"`
	Categories []string    `json:"categories"`
	Cases      []indexCase `json:"cases"`
}

type indexRun struct {
	Label   string `json:"label"`
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Details bool   `json:"details"`
	// Artifacts is the run's artifacts directory relative to the page,
	// with a slash, when it sits beside it ("" otherwise).
	Artifacts string `json:"artifacts,omitempty"`
}

type indexCase struct {
	ID       string       `json:"id"`
	Category string       `json:"cat,omitempty"`
	Input    string       `json:"input,omitempty"`
	Expected string       `json:"expected,omitempty"`
	Change   string       `json:"chg,omitempty"`
	Sides    []*indexSide `json:"sides"`
}

type indexSide struct {
	Status   string         `json:"st"`
	K        int            `json:"k"`
	N        int            `json:"n"`
	C        int            `json:"c"`
	Low      *float64       `json:"lo,omitempty"`
	High     *float64       `json:"hi,omitempty"`
	Errors   map[string]int `json:"err,omitempty"`
	Ungraded int            `json:"ung,omitempty"`
	Missing  int            `json:"miss,omitempty"`
	Warnings []string       `json:"warn,omitempty"`
	Trials   []indexTrial   `json:"tr"`
}

type indexTrial struct {
	Num       int                `json:"t"`
	Status    string             `json:"s"`
	Excluded  string             `json:"x,omitempty"`
	Score     *float64           `json:"sc,omitempty"`
	Duration  int64              `json:"d"`
	Agent     int64              `json:"ad,omitempty"`
	Start     int64              `json:"st,omitempty"`
	Reasoning string             `json:"r,omitempty"`
	Checks    []schemas.Check    `json:"ck,omitempty"`
	Grader    string             `json:"g,omitempty"`
	GraderOut string             `json:"go,omitempty"`
	Error     *schemas.ErrorInfo `json:"e,omitempty"`
	Stop      string             `json:"stop,omitempty"`
	Output    string             `json:"out,omitempty"`
	Cost      *float64           `json:"cost,omitempty"`
	Steps     int                `json:"n,omitempty"`
	Tools     int                `json:"tools,omitempty"`
	Ref       []int              `json:"ref,omitempty"`
}

func buildIndex(runs []*Run, dir string) index {
	ix := index{Categories: []string{}, Cases: []indexCase{}}
	for i, r := range runs {
		ix.Runs = append(ix.Runs, indexRun{Label: runLabel(i, len(runs)), Name: r.Name, Kind: r.Kind, Details: r.HasDetails(), Artifacts: artifactsBeside(r.Name, dir)})
	}
	cats := map[string]bool{}
	pos := map[string]int{}
	for ri, r := range runs {
		for _, c := range r.Cases {
			if c.Category != "" {
				cats[c.Category] = true
			}
			i, ok := pos[c.ID]
			if !ok {
				i = len(ix.Cases)
				pos[c.ID] = i
				ix.Cases = append(ix.Cases, indexCase{ID: c.ID, Category: c.Category, Input: c.Input,
					Expected: c.Expected, Sides: make([]*indexSide, len(runs))})
			}
			ic := &ix.Cases[i]
			if ic.Category == "" {
				ic.Category = c.Category
			}
			ic.Sides[ri] = buildSide(c)
		}
	}
	if len(runs) == 2 {
		for i := range ix.Cases {
			ic := &ix.Cases[i]
			ic.Change = change(runs[0].Case(ic.ID), runs[1].Case(ic.ID))
		}
	}
	ix.Categories = slices.Sorted(maps.Keys(cats))
	if ix.Categories == nil {
		ix.Categories = []string{}
	}
	return ix
}

func buildSide(c *Case) *indexSide {
	s := &indexSide{Status: c.Status(), K: c.K, N: c.Count.N, C: c.Count.C,
		Errors: c.Count.Errors, Ungraded: c.Count.Ungraded, Missing: c.Missing(), Warnings: c.Warnings}
	if lo, hi, ok := trials.Wilson(c.Count.C, c.Count.N, trials.Z95); ok {
		s.Low, s.High = &lo, &hi
	}
	for _, t := range c.Trials {
		it := indexTrial{Num: t.Num, Status: t.Status, Excluded: t.Excluded, Score: t.Score,
			Duration: t.Duration, Agent: t.Agent, Start: t.Start, Reasoning: t.Reasoning, Checks: t.Checks,
			Grader: t.Grader, GraderOut: t.GraderOutput, Error: t.Error, Stop: t.StopReason, Output: t.Output, Cost: t.Cost, Steps: t.Steps, Tools: t.ToolCalls}
		if t.chunk >= 0 {
			it.Ref = []int{t.chunk, t.pos}
		}
		s.Trials = append(s.Trials, it)
	}
	return s
}

func pct(f float64) string {
	return strconv.FormatFloat(100*f, 'f', 1, 64) + "%"
}

func fmtMS(ms float64) string {
	d := time.Duration(ms * float64(time.Millisecond))
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// artifactsBeside is the artifacts directory of the results file name
// relative to dir, the page's directory, as a URL path ending in a slash,
// when it is in dir; "" when it is not, or either is unknown.
func artifactsBeside(name, dir string) string {
	if dir == "" || name == "" || name == "-" {
		return ""
	}
	root, err := filepath.Abs(results.ArtifactsDir(name))
	if err != nil {
		return ""
	}
	d, err := filepath.Abs(dir)
	if err != nil || filepath.Dir(root) != d {
		return ""
	}
	return (&url.URL{Path: filepath.Base(root)}).EscapedPath() + "/"
}
