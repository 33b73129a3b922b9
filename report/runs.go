package report

import (
	"fmt"
	"html/template"
	"io"
	"path/filepath"
	"strings"

	"harness/cost"
	"harness/rundir"
)

// Series is one agent of one suite across runs: its pass rate in each run
// that ran it, oldest first.
type Series struct {
	Suite, Agent string
	// Points holds the pass rate of each run (nil when the run graded
	// nothing), in the order of the runs.
	Points []*float64
	// Dirs are the runs' directories, in the same order.
	Dirs []string
}

// Trend groups the agents of runs by suite and agent name.
func Trend(runs []rundir.Run) []Series {
	var out []Series
	index := map[string]int{}
	for _, r := range runs {
		for _, a := range r.Manifest.Agents {
			key := r.Manifest.Suite.Name + "\x00" + a.Name
			i, ok := index[key]
			if !ok {
				i = len(out)
				index[key] = i
				out = append(out, Series{Suite: r.Manifest.Suite.Name, Agent: a.Name})
			}
			out[i].Points = append(out[i].Points, a.PassRate)
			out[i].Dirs = append(out[i].Dirs, r.Dir)
		}
	}
	return out
}

// last returns the last two known points of a series.
func (s Series) last() (prev, cur *float64) {
	for _, p := range s.Points {
		if p != nil {
			prev, cur = cur, p
		}
	}
	return prev, cur
}

// Change is the last step of the series, for people: "0.667 → 0.833 (+0.167)".
func (s Series) Change() string {
	prev, cur := s.last()
	switch {
	case cur == nil:
		return "no graded run"
	case prev == nil:
		return fmt.Sprintf("%.3f", *cur)
	}
	return fmt.Sprintf("%.3f → %.3f (%+.3f)", *prev, *cur, *cur-*prev)
}

// sparkline draws the series' pass rates as an inline SVG polyline.
func (s Series) sparkline() template.HTML {
	const w, h, pad = 160.0, 36.0, 3.0
	var pts []string
	var dots strings.Builder
	n := len(s.Points)
	for i, p := range s.Points {
		if p == nil {
			continue
		}
		x := pad + (w-2*pad)*float64(i)/float64(max(n-1, 1))
		y := h - pad - (h-2*pad)**p
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
		fmt.Fprintf(&dots, `<circle cx="%.1f" cy="%.1f" r="2"><title>%s: %.3f</title></circle>`, x, y, template.HTMLEscapeString(filepath.Base(s.Dirs[i])), *p)
	}
	return template.HTML(fmt.Sprintf(`<svg width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img" aria-label="pass rate across runs"><line x1="0" y1="%.1f" x2="%.0f" y2="%.1f" class="axis"/><polyline points="%s"/>%s</svg>`,
		w, h, w, h, h-pad, w, h-pad, strings.Join(pts, " "), dots.String()))
}

var runsPage = template.Must(template.New("runs").Funcs(template.FuncMap{
	"rate": func(p *float64) string {
		if p == nil {
			return "—"
		}
		return fmt.Sprintf("%.3f", *p)
	},
	"cost": func(a rundir.Agent) string {
		if a.Cost == nil {
			return ""
		}
		return cost.Format(a.Cost)
	},
	"link": func(dir, name string) string { return filepath.ToSlash(filepath.Join(dir, name)) },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}th,td{padding:4px 10px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}
th{background:#f4f4f4}svg polyline{fill:none;stroke:#2a6fdb;stroke-width:1.5}svg circle{fill:#2a6fdb}svg .axis{stroke:#ccc}
.st-done{color:#1a7f37}.st-stopped,.st-running{color:#9a6700}.st-failed{color:#cf222e}
</style></head><body>
<h1>{{.Title}}</h1>
<p>{{len .Runs}} runs in {{.Dir}}, oldest first.</p>
<h2>Trend</h2>
<table id="trend"><tr><th>suite</th><th>agent</th><th>pass rate across runs</th><th>last change</th><th>runs</th></tr>
{{range .Trend}}<tr><td>{{.Suite}}</td><td>{{.Agent}}</td><td>{{.Spark}}</td><td data-field="change">{{.Change}}</td><td>{{len .Points}}</td></tr>
{{end}}</table>
<h2>Runs</h2>
<table id="runs"><tr><th>started</th><th>suite</th><th>status</th><th>k</th><th>cases</th><th>agents: pass rate, cost</th><th>report</th></tr>
{{range .Runs}}{{$m := .Manifest}}{{$d := .Dir}}<tr><td>{{$m.Started}}</td><td>{{$m.Suite.Name}}</td><td class="st-{{$m.Status}}">{{$m.Status}}</td><td>{{$m.K}}</td><td>{{$m.Cases}}</td>
<td>{{range $m.Agents}}<div><b>{{.Name}}</b> {{rate .PassRate}} {{with cost .}}· {{.}}{{end}}{{if ne .Status "ok"}} · {{.Status}}{{end}}</div>{{end}}</td>
<td>{{if $m.Report}}<a href="{{link $d $m.Report}}">report</a>{{end}}</td></tr>
{{end}}</table>
</body></html>
`))

type runsView struct {
	Title, Dir string
	Runs       []rundir.Run
	Trend      []seriesView
}

type seriesView struct {
	Series
	Spark template.HTML
}

// WriteRunsHTML writes one self-contained page of the runs in dir: the
// pass-rate trend of each suite's agents across them, then every run.
func WriteRunsHTML(w io.Writer, title, dir string, runs []rundir.Run) error {
	if title == "" {
		title = "harness runs"
	}
	v := runsView{Title: title, Dir: dir, Runs: runs}
	for _, s := range Trend(runs) {
		v.Trend = append(v.Trend, seriesView{Series: s, Spark: s.sparkline()})
	}
	return runsPage.Execute(w, v)
}

// WriteRunsMarkdown writes the trend and the runs as markdown tables.
func WriteRunsMarkdown(w io.Writer, title string, runs []rundir.Run) error {
	if title == "" {
		title = "harness runs"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "### %s\n\n| suite | agent | pass rate by run | last change |\n|---|---|---|---|\n", mdText(title))
	for _, s := range Trend(runs) {
		var pts []string
		for _, p := range s.Points {
			if p == nil {
				pts = append(pts, "—")
			} else {
				pts = append(pts, fmt.Sprintf("%.3f", *p))
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", mdText(s.Suite), mdText(s.Agent), strings.Join(pts, " → "), s.Change())
	}
	b.WriteString("\n| started | suite | status | agents |\n|---|---|---|---|\n")
	for _, r := range runs {
		m := r.Manifest
		var as []string
		for _, a := range m.Agents {
			rate := "—"
			if a.PassRate != nil {
				rate = fmt.Sprintf("%.3f", *a.PassRate)
			}
			as = append(as, a.Name+" "+rate)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", m.Started, mdText(m.Suite.Name), m.Status, mdText(strings.Join(as, ", ")))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
