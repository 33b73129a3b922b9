package view

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Query selects, orders and pages the rows of a source: the grid's state,
// as the page's URL holds it.
type Query struct {
	// Sort names the column (id, trial, cat, input, output, status,
	// score, checks, error, duration, tokens, cost, steps, start, or
	// meta.KEY); Desc reverses it.
	Sort string
	Desc bool
	// Status keeps the rows whose trial status (pass, fail, error,
	// ungraded) or case status (flaky) is listed; empty keeps all.
	Status []string
	// Changed keeps the rows of cases whose outcome differs in another
	// source (its id); Change narrows to gained or lost.
	Changed string
	Change  string
	// Category and Meta keep the rows with that category and those
	// metadata values.
	Category string
	Meta     map[string]string
	// Duration (ms) and cost (USD) ranges; nil bounds are open.
	MinDuration, MaxDuration *float64
	MinCost, MaxCost         *float64
	// Text keeps rows whose input or output contains it (any case).
	Text string
	// Offset and Limit page the result (Limit 0: 200).
	Offset, Limit int
	// Find, when set, pages around one trial instead: the 50 rows before
	// it, it and the 50 after (Page.At says where it is).
	Find *unitKey
}

// maxLimit bounds a page of rows.
const maxLimit = 2000

// parseQuery reads a query from URL parameters.
func parseQuery(v url.Values) (Query, error) {
	q := Query{Sort: v.Get("sort"), Desc: v.Get("desc") == "1", Changed: v.Get("changed"), Change: v.Get("chg"),
		Category: v.Get("cat"), Text: strings.ToLower(strings.TrimSpace(v.Get("q")))}
	if s := v.Get("st"); s != "" {
		q.Status = strings.Split(s, ",")
	}
	for k, vals := range v {
		if key, ok := strings.CutPrefix(k, "meta."); ok && len(vals) > 0 {
			if q.Meta == nil {
				q.Meta = map[string]string{}
			}
			q.Meta[key] = vals[0]
		}
	}
	num := func(name string) (*float64, error) {
		s := v.Get(name)
		if s == "" {
			return nil, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: want a number", name, s)
		}
		return &f, nil
	}
	var err error
	if q.MinDuration, err = num("dmin"); err != nil {
		return q, err
	}
	if q.MaxDuration, err = num("dmax"); err != nil {
		return q, err
	}
	if q.MinCost, err = num("cmin"); err != nil {
		return q, err
	}
	if q.MaxCost, err = num("cmax"); err != nil {
		return q, err
	}
	for _, p := range []struct {
		name string
		dst  *int
	}{{"offset", &q.Offset}, {"limit", &q.Limit}} {
		if s := v.Get(p.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return q, fmt.Errorf("%s=%q: want a whole number", p.name, s)
			}
			*p.dst = n
		}
	}
	if q.Limit == 0 {
		q.Limit = 200
	}
	if id := v.Get("find"); id != "" {
		t, err := strconv.Atoi(v.Get("ftrial"))
		if err != nil {
			return q, fmt.Errorf("ftrial=%q: want a trial number", v.Get("ftrial"))
		}
		q.Find = &unitKey{id, t}
	}
	q.Limit = min(q.Limit, maxLimit)
	return q, nil
}

// GridRow is a row as the grid gets it: the trial and what its case says.
type GridRow struct {
	*Row
	// CaseStatus is the case's status (pass, fail, flaky, error,
	// ungraded); CaseN and CaseC its graded and passed trials.
	CaseStatus string `json:"caseStatus"`
	CaseN      int    `json:"caseN"`
	CaseC      int    `json:"caseC"`
	// Change is the case's change against the Changed source (gained,
	// lost, same, no-verdict, only-here).
	Change string `json:"change,omitempty"`
}

// Page is one page of a query's rows.
type Page struct {
	Total   int `json:"total"`
	Matched int `json:"matched"`
	Offset  int `json:"offset"`
	// At is where the trial of Query.Find is among the matched rows (-1:
	// not among them).
	At   int       `json:"at"`
	Rows []GridRow `json:"rows"`
}

// outcome is a case's verdict for comparisons (harness compare's rule):
// pass when a strict majority of its graded trials passed.
func outcome(a *caseAgg) string {
	if a == nil || a.N == 0 {
		return ""
	}
	if 2*a.C > a.N {
		return statusPass
	}
	return statusFail
}

func changeOf(here, there *caseAgg) string {
	switch {
	case there == nil:
		return "only-here"
	}
	oh, ot := outcome(here), outcome(there)
	switch {
	case oh == "" || ot == "":
		return "no-verdict"
	case oh == ot:
		return "same"
	case oh == statusPass:
		return "gained"
	}
	return "lost"
}

// query runs q over the source's rows; other is the source of q.Changed
// (nil without one).
func (s *Source) query(q Query, other *Source) Page {
	aggs := s.caseAggs()
	var otherAggs map[string]*caseAgg
	if other != nil {
		otherAggs = other.caseAggs()
	}
	var keepStatus map[string]bool
	if len(q.Status) > 0 {
		keepStatus = map[string]bool{}
		for _, st := range q.Status {
			keepStatus[strings.TrimSpace(st)] = true
		}
	}
	changes := map[string]string{}
	rows := make([]GridRow, 0, len(s.rows))
	for _, r := range s.rows {
		if r == nil {
			continue
		}
		a := aggs[r.ID]
		gr := GridRow{Row: r}
		if a != nil {
			gr.CaseStatus, gr.CaseN, gr.CaseC = a.status, a.N, a.C
		}
		if keepStatus != nil && !keepStatus[r.Status] && !keepStatus[gr.CaseStatus] {
			continue
		}
		if other != nil {
			chg, ok := changes[r.ID]
			if !ok {
				chg = changeOf(a, otherAggs[r.ID])
				changes[r.ID] = chg
			}
			gr.Change = chg
			switch q.Change {
			case "", "changed":
				if chg != "gained" && chg != "lost" {
					continue
				}
			default:
				if chg != q.Change {
					continue
				}
			}
		}
		if q.Category != "" && r.Category != q.Category {
			continue
		}
		if !metaMatch(r, q.Meta) {
			continue
		}
		d := float64(r.Duration)
		if (q.MinDuration != nil && d < *q.MinDuration) || (q.MaxDuration != nil && d > *q.MaxDuration) {
			continue
		}
		if q.MinCost != nil || q.MaxCost != nil {
			c := 0.0
			if r.Cost != nil {
				c = *r.Cost
			}
			if (q.MinCost != nil && c < *q.MinCost) || (q.MaxCost != nil && c > *q.MaxCost) {
				continue
			}
		}
		if q.Text != "" && !strings.Contains(r.hay, q.Text) && !strings.Contains(strings.ToLower(r.ID), q.Text) {
			continue
		}
		rows = append(rows, gr)
	}
	if q.Sort == "" {
		pos := make(map[string]int, len(s.order))
		for i, id := range s.order {
			pos[id] = i
		}
		slices.SortStableFunc(rows, func(x, y GridRow) int {
			if c := cmp.Compare(pos[x.ID], pos[y.ID]); c != 0 {
				return c
			}
			return cmp.Compare(x.Trial, y.Trial)
		})
	} else {
		sortRows(rows, q.Sort, q.Desc)
	}
	p := Page{Total: s.live, Matched: len(rows), Offset: q.Offset, At: -1}
	if q.Find != nil {
		for i, r := range rows {
			if r.ID == q.Find.id && r.Trial == q.Find.trial {
				p.At = i
				break
			}
		}
		const around = 50
		p.Offset, q.Offset, q.Limit = max(0, p.At-around), max(0, p.At-around), 2*around+1
	}
	if q.Offset < len(rows) {
		p.Rows = rows[q.Offset:min(len(rows), q.Offset+q.Limit)]
	}
	if p.Rows == nil {
		p.Rows = []GridRow{}
	}
	return p
}

func metaMatch(r *Row, want map[string]string) bool {
	for k, v := range want {
		got, ok := r.Meta[k]
		if !ok || (v != "" && got != v && !slices.Contains(r.metaItems[k], v)) {
			return false
		}
	}
	return true
}

// statusOrder sorts statuses worst first.
var statusOrder = map[string]int{statusError: 0, statusFail: 1, "flaky": 2, statusUngraded: 3, statusPass: 4}

// sortRows orders rows by a column, ties by case id and trial.
func sortRows(rows []GridRow, col string, desc bool) {
	var key func(a, b *Row) int
	num := func(f func(r *Row) float64) func(a, b *Row) int {
		return func(a, b *Row) int { return cmp.Compare(f(a), f(b)) }
	}
	opt := func(p *float64) float64 {
		if p == nil {
			return -1
		}
		return *p
	}
	switch col {
	case "id":
		key = func(a, b *Row) int { return 0 }
	case "trial":
		key = func(a, b *Row) int { return cmp.Compare(a.Trial, b.Trial) }
	case "cat":
		key = func(a, b *Row) int { return strings.Compare(a.Category, b.Category) }
	case "input":
		key = func(a, b *Row) int { return strings.Compare(a.Input, b.Input) }
	case "output":
		key = func(a, b *Row) int { return strings.Compare(a.Output, b.Output) }
	case "status":
		key = func(a, b *Row) int { return cmp.Compare(statusOrder[a.Status], statusOrder[b.Status]) }
	case "score":
		key = num(func(r *Row) float64 { return opt(r.Score) })
	case "checks":
		key = func(a, b *Row) int {
			if c := cmp.Compare(a.Failed, b.Failed); c != 0 {
				return c
			}
			return cmp.Compare(a.Checks, b.Checks)
		}
	case "error":
		key = func(a, b *Row) int { return strings.Compare(a.Error, b.Error) }
	case "duration":
		key = num(func(r *Row) float64 { return float64(r.Duration) })
	case "tokens":
		key = num(func(r *Row) float64 { return float64(r.Tokens) })
	case "cost":
		key = num(func(r *Row) float64 { return opt(r.Cost) })
	case "steps":
		key = num(func(r *Row) float64 { return float64(r.Steps) })
	case "start":
		key = num(func(r *Row) float64 { return float64(r.Start) })
	default:
		if m, ok := strings.CutPrefix(col, "meta."); ok {
			key = func(a, b *Row) int { return compareMeta(a.Meta[m], b.Meta[m]) }
		} else {
			key = func(a, b *Row) int { return 0 }
		}
	}
	slices.SortStableFunc(rows, func(x, y GridRow) int {
		c := key(x.Row, y.Row)
		if desc {
			c = -c
		}
		if c != 0 {
			return c
		}
		if c := strings.Compare(x.ID, y.ID); c != 0 {
			return c
		}
		return cmp.Compare(x.Trial, y.Trial)
	})
}

// compareMeta orders metadata values as numbers when both are.
func compareMeta(a, b string) int {
	fa, ea := strconv.ParseFloat(a, 64)
	fb, eb := strconv.ParseFloat(b, 64)
	if ea == nil && eb == nil {
		return cmp.Compare(fa, fb)
	}
	return strings.Compare(a, b)
}
