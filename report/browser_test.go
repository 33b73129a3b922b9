package report

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"harness/schemas"
)

// These tests open reports in a real browser (Debian's chromium, headless,
// driven over the DevTools protocol). Without a browser they are skipped,
// unless HARNESS_REQUIRE_AGENTS is set (as in CI): then they fail.

// findBrowser returns the path of a Chromium-family browser, or skips (or
// fails, under HARNESS_REQUIRE_AGENTS) the test.
func findBrowser(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("HARNESS_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium on PATH (install it with: apt-get install -y chromium; or set HARNESS_CHROMIUM)"
	if os.Getenv("HARNESS_REQUIRE_AGENTS") != "" {
		t.Fatalf("%s; HARNESS_REQUIRE_AGENTS is set, so the browser tests must run", msg)
	}
	t.Skip(msg)
	return ""
}

// tab is one headless browser tab that records what a report must never
// do: console errors, uncaught exceptions, error log entries, dialogs and
// requests for anything but the file itself.
type tab struct {
	t        *testing.T
	ctx      context.Context
	mu       sync.Mutex
	problems []string
}

func newTab(t *testing.T, width, height int) *tab {
	t.Helper()
	path := findBrowser(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, height),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	tb := &tab{t: t, ctx: ctx}
	if err := chromedp.Listen(ctx, tb.watch); err != nil {
		t.Fatalf("start the browser (%s): %v", path, err)
	}
	return tb
}

func (tb *tab) watch(ev any) {
	var p string
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning {
			var parts []string
			for _, a := range ev.Args {
				parts = append(parts, string(a.Value)+a.Description)
			}
			p = fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(parts, " "))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		p = fmt.Sprintf("uncaught exception: %s (line %d)", d.Text, d.LineNumber+1)
		if d.Exception != nil {
			p += ": " + d.Exception.Description
		}
	case *log.EventEntryAdded:
		if ev.Entry.Level == log.EntryLevelError {
			p = fmt.Sprintf("browser log error: %s %s", ev.Entry.Text, ev.Entry.URL)
		}
	case *network.EventRequestWillBeSent:
		if u := ev.Request.URL; !strings.HasPrefix(u, "file:") && !strings.HasPrefix(u, "data:") {
			p = "the page fetched " + u
		}
	case *cdppage.EventJavascriptDialogOpening:
		p = fmt.Sprintf("a %s dialog opened: %q (injected script?)", ev.Type, ev.Message)
	}
	if p != "" {
		tb.mu.Lock()
		tb.problems = append(tb.problems, p)
		tb.mu.Unlock()
	}
}

// open loads a report file and waits until its script has rendered the
// case list; it returns how long that took.
func (tb *tab) open(path, hash string) time.Duration {
	tb.t.Helper()
	u := (&url.URL{Scheme: "file", Path: path}).String()
	if hash != "" {
		u += "#" + hash
	}
	start := time.Now()
	if err := chromedp.Do(tb.ctx, chromedp.Navigate(u)); err != nil {
		tb.t.Fatalf("navigate %s: %v", u, err)
	}
	tb.waitJS(`document.body && document.body.getAttribute("data-ready") === "1"`)
	return time.Since(start)
}

// waitJS waits until the expression is truthy.
func (tb *tab) waitJS(expr string) {
	tb.t.Helper()
	_, err := chromedp.Run(tb.ctx, chromedp.Poll[chromedp.Void](expr,
		chromedp.WithPollingTimeout(90*time.Second), chromedp.WithPollingInterval(20*time.Millisecond)))
	if err != nil {
		tb.t.Fatalf("waiting for %s: %v (problems: %v)", expr, err, tb.issues())
	}
}

func (tb *tab) click(sel string) {
	tb.t.Helper()
	if err := chromedp.Do(tb.ctx, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible)); err != nil {
		tb.t.Fatalf("click %s: %v", sel, err)
	}
}

func (tb *tab) issues() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]string(nil), tb.problems...)
}

// clean fails the test on anything the page logged as an error.
func (tb *tab) clean() {
	tb.t.Helper()
	// Let late events arrive.
	evalJS[bool](tb, `new Promise(r => requestAnimationFrame(() => setTimeout(() => r(true), 50)))`, chromedp.EvalAwaitPromise)
	for _, p := range tb.issues() {
		tb.t.Errorf("browser: %s", p)
	}
}

func evalJS[T any](tb *tab, expr string, opts ...chromedp.EvaluateOption) T {
	tb.t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		tb.t.Fatalf("evaluate %s: %v (problems: %v)", expr, err, tb.issues())
	}
	return v
}

// openCase opens a case through the URL hash and waits for its view.
func (tb *tab) openCase(id string) {
	tb.t.Helper()
	tb.waitJS(fmt.Sprintf(`(location.hash = "case=" + encodeURIComponent(%q), document.getElementById("detail").getAttribute("data-case") === %q)`, id, id))
}

func TestBrowserTrialsReport(t *testing.T) {
	run := readFixture(t, "trials_a.jsonl", true)
	sum := run.Summary(1, 200)
	path := writeHTML(t, t.TempDir(), Options{Resamples: 200}, run)
	tb := newTab(t, 1400, 1000)
	took := tb.open(path, "")
	t.Logf("loaded in %v", took)

	type overview struct {
		SummaryRows int            `json:"summaryRows"`
		PassRate    string         `json:"passRate"`
		AtPoints    int            `json:"atPoints"`
		ExpPoints   int            `json:"expPoints"`
		AtSeries    int            `json:"atSeries"`
		Rows        []string       `json:"rows"`
		Flaky       []string       `json:"flaky"`
		Failing     []string       `json:"failing"`
		Errored     []string       `json:"errored"`
		Counts      map[string]int `json:"counts"`
		Shown       string         `json:"shown"`
		Scripts     int            `json:"scripts"`
		Categories  []string       `json:"categories"`
	}
	ov := evalJS[overview](tb, `(() => {
		const ids = sel => [...document.querySelectorAll(sel)].map(a => a.getAttribute("data-case"));
		const counts = {};
		document.querySelectorAll(".fcount").forEach(n => counts[n.dataset.status] = +n.textContent);
		return {
			summaryRows: document.querySelectorAll("#summary-table tbody tr").length,
			passRate: document.querySelector('#summary-table td[data-field="pass-rate"]').textContent,
			atPoints: document.querySelectorAll('figure[data-metric="passAt"] circle.pt').length,
			expPoints: document.querySelectorAll('figure[data-metric="passExp"] circle.pt').length,
			atSeries: document.querySelectorAll('figure[data-metric="passAt"] g.series').length,
			rows: [...document.querySelectorAll("#case-rows .case-row")].map(r => r.dataset.id),
			flaky: ids(".flaky-list a"), failing: ids(".fail-list a"), errored: ids(".error-list a"),
			counts, shown: document.getElementById("shown-count").textContent,
			scripts: document.scripts.length,
			categories: [...document.querySelectorAll("#filter-category option")].map(o => o.value).filter(Boolean),
		};
	})()`)
	if ov.SummaryRows < 8 {
		t.Errorf("summary table has %d rows", ov.SummaryRows)
	}
	if want := pct(*sum.PassRate); !strings.Contains(ov.PassRate, want) {
		t.Errorf("pass rate cell %q lacks %s", ov.PassRate, want)
	}
	if len(sum.PassAt) != 4 || ov.AtPoints != len(sum.PassAt) || ov.ExpPoints != len(sum.PassExp) || ov.AtSeries != 1 {
		t.Errorf("curves: %d pass@k and %d pass^k points in %d series, want %d and %d in 1",
			ov.AtPoints, ov.ExpPoints, ov.AtSeries, len(sum.PassAt), len(sum.PassExp))
	}
	if len(ov.Rows) != len(run.Cases) || ov.Shown != fmt.Sprintf("%d of %d cases", len(run.Cases), len(run.Cases)) {
		t.Errorf("case list: %d rows (%q), want %d", len(ov.Rows), ov.Shown, len(run.Cases))
	}
	if fmt.Sprint(ov.Flaky) != "[flaky-echo]" || fmt.Sprint(ov.Failing) != "[wrong-answer]" || fmt.Sprint(ov.Errored) != "[crash hang]" {
		t.Errorf("lists: flaky %v failing %v errored %v", ov.Flaky, ov.Failing, ov.Errored)
	}
	if ov.Counts["pass"] != 10 || ov.Counts["flaky"] != 1 || ov.Counts["fail"] != 1 || ov.Counts["error"] != 2 {
		t.Errorf("status counts %v", ov.Counts)
	}
	// The index, one chunk of records and the page script: nothing injected.
	if ov.Scripts != 3 {
		t.Errorf("%d script elements, want 3 (an injected one?)", ov.Scripts)
	}
	if fmt.Sprint(ov.Categories) != "[<i>escaping</i> conversation files math robustness tools]" {
		t.Errorf("categories %q", ov.Categories)
	}

	// Opening a case renders its trajectory: trial 1 of "tools" (all pass).
	tools := run.Case("tools")
	tb.click(`.case-row[data-id="tools"]`)
	tb.waitJS(`document.getElementById("detail").getAttribute("data-case") === "tools"`)
	type detail struct {
		Steps     string         `json:"steps"`
		Trial     string         `json:"trial"`
		Types     map[string]int `json:"types"`
		Tabs      []string       `json:"tabs"`
		Verdict   string         `json:"verdict"`
		Title     string         `json:"title"`
		Bold      int            `json:"bold"`
		Output    string         `json:"output"`
		ToolInput string         `json:"toolInput"`
		Chosen    string         `json:"chosen"`
		Phases    []string       `json:"phases"`
	}
	const readDetail = `(() => {
		const d = document.getElementById("detail");
		const types = {};
		d.querySelectorAll(".step").forEach(s => { const ty = s.classList[1]; types[ty] = (types[ty] || 0) + 1; });
		const first = sel => { const n = d.querySelector(sel); return n ? n.textContent : ""; };
		return {
			steps: d.getAttribute("data-steps"), trial: d.getAttribute("data-trial"), types,
			tabs: [...d.querySelectorAll(".tabs button .sq")].map(s => s.className.replace("sq ", "")),
			verdict: first(".verdict"), title: first("h3.caseid"), bold: d.querySelectorAll("b").length,
			output: first(".record > pre"), toolInput: first(".step.tool_call pre"), chosen: first(".opts .chosen"),
			phases: [...d.querySelectorAll(".tag.phase")].map(n => n.textContent),
		};
	})()`
	dt := evalJS[detail](tb, readDetail)
	if want := fmt.Sprint(tools.Trials[0].Steps); dt.Steps != want || dt.Trial != "1" {
		t.Errorf("tools: trial %s with %s steps rendered, want trial 1 with %s", dt.Trial, dt.Steps, want)
	}
	for _, ty := range []string{"thought", "tool_call", "plan", "message", "user_message", "usage", "mode", "event"} {
		if dt.Types[ty] == 0 {
			t.Errorf("tools: no %s step rendered (types %v)", ty, dt.Types)
		}
	}
	if dt.Types["tool_call"] != tools.Trials[0].ToolCalls {
		t.Errorf("tools: %d tool calls rendered, want %d", dt.Types["tool_call"], tools.Trials[0].ToolCalls)
	}
	if !strings.Contains(dt.ToolInput, `"path"`) || !strings.Contains(dt.Output, "looks fine") {
		t.Errorf("tools: tool input %q, output %q", dt.ToolInput, dt.Output)
	}
	if !strings.Contains(dt.Verdict, "PASS") || !strings.Contains(dt.Verdict, "output contains the expected text") {
		t.Errorf("tools: verdict %q lacks the grader's verdict and checks", dt.Verdict)
	}

	// A flaky case: the strip of its trials, and a failing trial opens first.
	tb.openCase("flaky-echo")
	dt = evalJS[detail](tb, readDetail)
	if fmt.Sprint(dt.Tabs) != "[pass fail pass fail]" || dt.Trial != "2" {
		t.Errorf("flaky-echo: tabs %v, trial %s opened; want [pass fail pass fail] and trial 2", dt.Tabs, dt.Trial)
	}
	if !strings.Contains(dt.Verdict, "✗ trial number is odd") {
		t.Errorf("flaky-echo: verdict %q lacks the failed check", dt.Verdict)
	}
	tb.click(`#detail .tabs button[data-trial="3"]`)
	tb.waitJS(`document.getElementById("detail").getAttribute("data-trial") === "3"`)

	// Permissions, infrastructure errors, late updates, fs and terminal steps.
	tb.openCase("permission")
	if dt = evalJS[detail](tb, readDetail); dt.Types["permission"] != 1 || !strings.Contains(dt.Chosen, "once") {
		t.Errorf("permission: types %v, chosen %q", dt.Types, dt.Chosen)
	}
	tb.openCase("crash")
	if dt = evalJS[detail](tb, readDetail); !strings.Contains(dt.Verdict, "agent_crash") || !strings.Contains(dt.Verdict, "simulated crash") {
		t.Errorf("crash: verdict %q lacks the error class and stderr", dt.Verdict)
	}
	lateTrial := 0
	for _, tr := range run.Case("late").Trials {
		if tr.Steps > 1 {
			lateTrial = tr.Num
		}
	}
	if lateTrial == 0 {
		t.Fatal("fixture: no trial of case late has late updates")
	}
	tb.waitJS(fmt.Sprintf(`(location.hash = "case=late&run=0&trial=%d", document.getElementById("detail").getAttribute("data-trial") === "%d")`, lateTrial, lateTrial))
	if dt = evalJS[detail](tb, readDetail); !slices.Contains(dt.Phases, "late") || !slices.Contains(dt.Phases, "stray") || dt.Types["event"] == 0 {
		t.Errorf("late: phases %v, types %v", dt.Phases, dt.Types)
	}
	tb.openCase("fs")
	if dt = evalJS[detail](tb, readDetail); dt.Types["fs_read"] != 1 {
		t.Errorf("fs: types %v", dt.Types)
	}
	tb.openCase("terminal")
	if dt = evalJS[detail](tb, readDetail); dt.Types["terminal"] == 0 {
		t.Errorf("terminal: types %v", dt.Types)
	}

	// Hostile text stays text.
	tb.openCase("html</script>")
	if dt = evalJS[detail](tb, readDetail); dt.Title != "html</script>" || dt.Bold != 0 || !strings.Contains(dt.Output, "<b>bold</b>") {
		t.Errorf("escaping: title %q, %d <b> elements, output %q", dt.Title, dt.Bold, dt.Output)
	}

	// Filters: status and category.
	tb.click(`#filters input[value="pass"]`)
	tb.waitJS(fmt.Sprintf(`document.querySelectorAll("#case-rows .case-row").length === %d`, len(run.Cases)-10))
	evalJS[bool](tb, `(() => { const s = document.getElementById("filter-category"); s.value = "robustness"; s.dispatchEvent(new Event("change")); return true; })()`)
	rows := evalJS[[]string](tb, `[...document.querySelectorAll("#case-rows .case-row")].map(r => r.dataset.id)`)
	if fmt.Sprint(rows) != "[crash hang]" { // grader-hiccup passes its 3 graded trials
		t.Errorf("filtered rows (not pass, robustness) = %v", rows)
	}
	tb.click(`#filters input[value="pass"]`)
	evalJS[bool](tb, `(() => { const s = document.getElementById("filter-text"); s.value = "TURN"; s.dispatchEvent(new Event("input")); return true; })()`)
	tb.waitJS(`document.querySelectorAll("#case-rows .case-row").length === 0`) // two-turns is "conversation"
	tb.clean()
}

func TestBrowserCompare(t *testing.T) {
	a := readFixture(t, "trials_a.jsonl", true)
	b := readFixture(t, "trials_b.jsonl", true)
	path := writeHTML(t, t.TempDir(), Options{Resamples: 100}, a, b)
	tb := newTab(t, 1400, 1000)
	tb.open(path, "")
	type cmp struct {
		Series  []int    `json:"series"`
		Matrix  bool     `json:"matrix"`
		Gained  string   `json:"gained"`
		Lost    string   `json:"lost"`
		Strips  int      `json:"strips"`
		Changes []string `json:"changes"`
		Pass    int      `json:"pass"`
	}
	c := evalJS[cmp](tb, `(() => ({
		series: [...document.querySelectorAll('figure[data-metric="passAt"] g.series')].map(g => g.querySelectorAll("circle.pt").length),
		matrix: !!document.getElementById("status-matrix"),
		gained: document.querySelector('[data-field="gained"]').textContent,
		lost: document.querySelector('[data-field="lost"]').textContent,
		strips: document.querySelectorAll('#case-rows .case-row')[0].querySelectorAll(".strip").length,
		changes: [...document.querySelectorAll("#case-rows .chg")].map(n => n.textContent),
		pass: +document.querySelector('.fcount[data-status="pass"]').textContent,
	}))()`)
	// 15 cases: 12 pass in A or in B (a case counts once per status).
	if c.Pass != 12 || len(c.Changes) != 15 || c.Changes[0] != "lost" || c.Changes[7] != "no verdict" {
		t.Errorf("compare counts: pass %d, changes %q", c.Pass, c.Changes)
	}
	if fmt.Sprint(c.Series) != "[4 4]" || !c.Matrix || c.Gained != "1 gained" || c.Lost != "1 lost" || c.Strips != 2 {
		t.Errorf("compare view: %+v", c)
	}
	evalJS[bool](tb, `(() => { const s = document.getElementById("filter-change"); s.value = "lost"; s.dispatchEvent(new Event("change")); return true; })()`)
	rows := evalJS[[]string](tb, `[...document.querySelectorAll("#case-rows .case-row")].map(r => r.dataset.id)`)
	if fmt.Sprint(rows) != "[answer]" {
		t.Errorf("lost cases = %v, want [answer]", rows)
	}
	// A lost case opens on B's failing trial; a case of B only says so.
	tb.click(`.case-row[data-id="answer"]`)
	tb.waitJS(`document.getElementById("detail").getAttribute("data-case") === "answer"`)
	if run := evalJS[string](tb, `document.getElementById("detail").getAttribute("data-run")`); run != "1" {
		t.Errorf("lost case opened run %s, want 1 (B)", run)
	}
	tb.openCase("new-case")
	if txt := evalJS[string](tb, `document.getElementById("detail").textContent`); !strings.Contains(txt, "not in A") {
		t.Errorf("only-B case: %q", txt)
	}
	tb.clean()
}

func TestBrowserCaptureReport(t *testing.T) {
	run := readFixture(t, "capture.jsonl", true)
	path := writeHTML(t, t.TempDir(), Options{}, run)
	tb := newTab(t, 1200, 900)
	tb.open(path, "case=tools")
	pts := evalJS[[]int](tb, `[...document.querySelectorAll("figure.chart")].map(f => f.querySelectorAll("circle.pt").length)`)
	if fmt.Sprint(pts) != "[1 1]" {
		t.Errorf("capture file: points per chart %v, want [1 1] (k = 1)", pts)
	}
	tb.waitJS(`document.getElementById("detail").getAttribute("data-case") === "tools"`)
	if n := evalJS[int](tb, `document.querySelectorAll("#detail .step").length`); n != run.Case("tools").Trials[0].Steps {
		t.Errorf("tools: %d steps rendered, want %d", n, run.Case("tools").Trials[0].Steps)
	}
	tb.clean()
}

// A case's panel lists the work tree's changes and, apart, those inside
// the repository's .git with their diffs.
func TestBrowserGitChanges(t *testing.T) {
	run, err := NewRun("git.jsonl", RunOptions{Details: true, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Close() })
	rec := synthRecord("commit", 1, true, 2, "")
	rec.Workspace = &schemas.Workspace{Path: "/ws",
		FileChanges: []schemas.FileChange{{Path: "a.py", Status: "modified", Diff: "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-print(1)\n+print(2)\n", Size: 9}},
		GitChanges: []schemas.FileChange{
			{Path: ".git/config", Status: "modified", Diff: "diff --git a/.git/config b/.git/config\n--- a/.git/config\n+++ b/.git/config\n@@ -1 +1,2 @@\n [core]\n+\tsshCommand = touch x\n", Size: 30},
			{Path: ".git/refs/heads/main", Status: "modified", Size: 41},
		}}
	if err := run.AddCapture(&rec); err != nil {
		t.Fatal(err)
	}
	path := writeHTML(t, t.TempDir(), Options{}, run)
	tb := newTab(t, 1200, 900)
	tb.open(path, "")
	tb.openCase("commit")
	type view struct {
		Files []string `json:"files"`
		Git   string   `json:"git"`
		Lines []string `json:"lines"`
	}
	v := evalJS[view](tb, `(() => {
		const g = document.querySelector("#detail details.gitchanges");
		return {
			files: [...document.querySelectorAll("#detail details:not(.gitchanges) > div.mono")].map(d => d.textContent),
			git: g ? g.querySelector("summary").textContent + "|" + g.textContent : "",
			lines: g ? [...g.querySelectorAll(":scope > div.mono")].map(d => d.textContent) : [],
		};
	})()`)
	if fmt.Sprint(v.Files) != "[modified a.py · 9 bytes]" {
		t.Errorf("file changes: %q", v.Files)
	}
	if !strings.HasPrefix(v.Git, "2 change(s) inside .git|") || !strings.Contains(v.Git, "sshCommand = touch x") {
		t.Errorf(".git changes: %q", v.Git)
	}
	if fmt.Sprint(v.Lines) != "[modified .git/config · 30 bytes modified .git/refs/heads/main · 41 bytes]" {
		t.Errorf(".git change lines: %q", v.Lines)
	}
	tb.clean()
}

// TestBrowserWithoutDetails: a report written without trajectories still
// works, and says so when a case is opened.
func TestBrowserWithoutDetails(t *testing.T) {
	run := readFixture(t, "trials_a.jsonl", false)
	path := writeHTML(t, t.TempDir(), Options{}, run)
	tb := newTab(t, 1200, 900)
	tb.open(path, "case=tools")
	tb.waitJS(`document.getElementById("detail").getAttribute("data-case") === "tools"`)
	if txt := evalJS[string](tb, `document.getElementById("detail").textContent`); !strings.Contains(txt, "without trajectories") {
		t.Errorf("detail without records: %q", txt)
	}
	tb.clean()
}

// TestBrowserLarge: 10,000 trials (2,000 cases × 5) with 12-step
// trajectories load, scroll and open within generous bounds, and only the
// rows in view are in the DOM.
func TestBrowserLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the 10,000-trial report")
	}
	const cases, k, steps = 2000, 5, 12
	start := time.Now()
	run := synthRun(t, cases, k, steps, true)
	path := writeHTML(t, t.TempDir(), Options{}, run)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d trials: report %.1f MB written in %v", cases*k, float64(st.Size())/(1<<20), time.Since(start).Round(time.Millisecond))

	tb := newTab(t, 1400, 1000)
	took := tb.open(path, "")
	t.Logf("%d trials: page ready in %v", cases*k, took.Round(time.Millisecond))
	if took > 60*time.Second {
		t.Errorf("a 10,000-trial report took %v to load (bound 60s)", took)
	}
	if n := evalJS[int](tb, `document.querySelectorAll("#case-rows .case-row").length`); n == 0 || n > 150 {
		t.Errorf("%d rows in the DOM: want only the rows in view (virtualized)", n)
	}
	if pts := evalJS[int](tb, `document.querySelectorAll('figure[data-metric="passExp"] circle.pt').length`); pts != k {
		t.Errorf("%d pass^k points, want %d", pts, k)
	}
	// Scroll to the end: the last case is rendered.
	scrollStart := time.Now()
	evalJS[bool](tb, `(() => { const l = document.getElementById("case-list"); l.scrollTop = l.scrollHeight; return true; })()`)
	last := fmt.Sprintf("case-%05d", cases-1)
	tb.waitJS(fmt.Sprintf(`!!document.querySelector('.case-row[data-id="%s"]')`, last))
	t.Logf("scrolled to the last of %d cases in %v", cases, time.Since(scrollStart).Round(time.Millisecond))
	if n := evalJS[int](tb, `document.querySelectorAll("#case-rows .case-row").length`); n > 150 {
		t.Errorf("%d rows in the DOM after scrolling", n)
	}
	openStart := time.Now()
	tb.click(fmt.Sprintf(`.case-row[data-id="%s"]`, last))
	tb.waitJS(fmt.Sprintf(`document.getElementById("detail").getAttribute("data-case") === %q && document.getElementById("detail").getAttribute("data-steps") === "%d"`, last, steps))
	t.Logf("opened a case in %v", time.Since(openStart).Round(time.Millisecond))
	// Filtering 2,000 cases: only the failing ones.
	evalJS[bool](tb, `(() => { for (const s of ["pass", "flaky", "error", "ungraded"]) { const b = document.querySelector('#filters input[value="' + s + '"]'); b.checked = false; b.dispatchEvent(new Event("change")); } return true; })()`)
	if got := evalJS[string](tb, `document.getElementById("shown-count").textContent`); got != fmt.Sprintf("%d of %d cases", cases/10, cases) {
		t.Errorf("failing filter: %q", got)
	}
	tb.clean()
}

// TestReportScreenshot writes the screenshot of the docs when
// HARNESS_REPORT_SCREENSHOT names the PNG file to write:
//
//	HARNESS_REPORT_SCREENSHOT=$PWD/docs/report.png go test ./report -run Screenshot
func TestReportScreenshot(t *testing.T) {
	out := os.Getenv("HARNESS_REPORT_SCREENSHOT")
	if out == "" {
		t.Skip("set HARNESS_REPORT_SCREENSHOT=file.png to write the screenshot of docs/report.md")
	}
	run := readFixture(t, "trials_a.jsonl", true)
	path := writeHTML(t, t.TempDir(), Options{Title: "harness report: quickstart trials (k = 4)"}, run)
	tb := newTab(t, 1440, 1500)
	tb.open(path, "")
	tb.openCase("tools")
	png, err := chromedp.Run(tb.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	tb.clean()
}

// Three runs side by side: a strip per run in every case row, a curve per
// run, and the detail labels each run's trials.
func TestBrowserThreeRuns(t *testing.T) {
	a := readFixture(t, "trials_a.jsonl", true)
	b := readFixture(t, "trials_b.jsonl", true)
	c := readFixture(t, "trials_a.jsonl", true)
	path := writeHTML(t, t.TempDir(), Options{Resamples: 50}, a, b, c)
	tb := newTab(t, 1400, 1000)
	tb.open(path, "")
	type view struct {
		Series []int    `json:"series"`
		Head   []string `json:"head"`
		Strips int      `json:"strips"`
		Matrix bool     `json:"matrix"`
		Runs   []string `json:"runs"`
	}
	v := evalJS[view](tb, `(() => ({
		series: [...document.querySelectorAll('figure[data-metric="passAt"] g.series')].map(g => g.querySelectorAll("circle.pt").length),
		head: [...document.querySelectorAll("#case-head span")].map(n => n.textContent),
		strips: document.querySelectorAll('#case-rows .case-row')[0].querySelectorAll(".strip").length,
		matrix: !!document.getElementById("status-matrix"),
		runs: [...document.querySelectorAll("#summary-table th.runcol")].map(n => n.textContent),
	}))()`)
	if len(v.Series) != 3 || v.Strips != 3 || v.Matrix || len(v.Runs) != 3 ||
		fmt.Sprint(v.Head) != "[case category A trials B trials C trials]" {
		t.Errorf("three-run view: %+v", v)
	}
	tb.openCase("answer")
	if txt := evalJS[string](tb, `document.getElementById("detail").textContent`); !strings.Contains(txt, "A:") || !strings.Contains(txt, "C:") {
		t.Errorf("detail of a case in three runs: %q", txt)
	}
	tb.clean()
}

// TestBrowserEvidenceAndSort: a failed check shows its evidence (the
// failing test's message), and the case list sorts by its columns.
func TestBrowserEvidenceAndSort(t *testing.T) {
	f, err := os.Open("../testdata/view/workspace-go.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := ReadRun("workspace-go.jsonl", f, RunOptions{Details: true, TempDir: t.TempDir()})
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	for _, details := range []bool{true, false} {
		run := ws
		if !details {
			f, _ := os.Open("../testdata/view/workspace-go.jsonl")
			run, err = ReadRun("workspace-go.jsonl", f, RunOptions{})
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
		path := writeHTML(t, t.TempDir(), Options{Resamples: 50}, run)
		tb := newTab(t, 1400, 1000)
		tb.open(path, "")
		tb.openCase("wrong")
		ev := evalJS[string](tb, `(document.querySelector("#detail .checks li.failed-check pre.evidence") || {}).textContent || ""`)
		if !strings.Contains(ev, "Add(2, 2) = 0, want 4") {
			t.Errorf("details %v: evidence shown %q", details, ev)
		}
		tb.clean()
	}

	run := readFixture(t, "trials_a.jsonl", true)
	path := writeHTML(t, t.TempDir(), Options{Resamples: 50}, run)
	tb := newTab(t, 1400, 1000)
	tb.open(path, "")
	heads := evalJS[[]string](tb, `[...document.querySelectorAll("#case-head .sorth")].map(b => b.dataset.sort)`)
	if fmt.Sprint(heads) != "[status id cat rate output score duration cost errors]" {
		t.Errorf("sortable columns %v", heads)
	}
	// Duration, longest first: the mean trial durations in the rows fall.
	tb.click(`#case-head .sorth[data-sort="duration"]`)
	rows := evalJS[[]string](tb, `[...document.querySelectorAll("#case-rows .case-row")].map(r => r.dataset.id)`)
	var prev float64 = -1
	for i, id := range rows {
		var d, n float64
		for _, tr := range run.Case(id).Trials {
			d += float64(tr.Duration)
			n++
		}
		if i > 0 && d/n > prev {
			t.Errorf("sorted by duration, %s (%.0f ms) comes after %.0f ms: %v", id, d/n, prev, rows)
			break
		}
		prev = d / n
	}
	// Again: shortest first.
	tb.click(`#case-head .sorth[data-sort="duration"]`)
	again := evalJS[[]string](tb, `[...document.querySelectorAll("#case-rows .case-row")].map(r => r.dataset.id)`)
	if len(again) == 0 || again[0] != rows[len(rows)-1] {
		t.Errorf("reversed order starts with %v, want %s", again, rows[len(rows)-1])
	}
	out := evalJS[string](tb, `document.querySelector('#case-rows .case-row[data-id="tools"] .outc').textContent`)
	if out != "The file looks fine." {
		t.Errorf("output column of tools: %q", out)
	}
	tb.clean()
}

// A trial's model calls are a lane under its timing bar (a failed call
// marked), and the record's head sums them, whole and per turn.
func TestBrowserModelCalls(t *testing.T) {
	run, err := NewRun("calls.jsonl", RunOptions{Details: true, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Close() })
	rec := synthRecord("ledger", 1, true, 3, "")
	n := func(v int64) *int64 { return &v }
	price := func(v float64) *float64 { return &v }
	start := rec.Timing.Start
	rec.ModelCalls = []schemas.ModelCall{
		{Provider: "anthropic", API: "messages", Model: "claude-sonnet-4-5", Start: start + 100, Duration: 300, Status: 429, Turn: 1,
			Error: &schemas.ModelCallError{Kind: schemas.ModelErrRateLimit, Message: "slow down"}},
		{Provider: "anthropic", API: "messages", Model: "claude-sonnet-4-5", Start: start + 450, Duration: 500, Status: 200, Turn: 1,
			InputTokens: n(100), CachedTokens: n(50), CacheWriteTokens: n(5), OutputTokens: n(20), USD: price(0.0012)},
		{Provider: "anthropic", API: "messages", Model: "mystery", Start: start + 1000, Duration: 200, Status: 200, Turn: 2,
			InputTokens: n(10), OutputTokens: n(2)},
	}
	rec.Timing.Waited = 350 // the 429 and the wait after it
	if err := run.AddCapture(&rec); err != nil {
		t.Fatal(err)
	}
	path := writeHTML(t, t.TempDir(), Options{}, run)
	tb := newTab(t, 1200, 900)
	tb.open(path, "")
	tb.openCase("ledger")
	type view struct {
		Calls  []string `json:"calls"`
		Titles []string `json:"titles"`
		Rows   []string `json:"rows"`
		Legend string   `json:"legend"`
		Timing string   `json:"timing"`
	}
	v := evalJS[view](tb, `(() => {
		const calls = [...document.querySelectorAll("#detail .tcalls .tcall")];
		const dts = [...document.querySelectorAll("#detail dl.kv dt")];
		return {
			calls: calls.map(c => c.className),
			titles: calls.map(c => c.title),
			rows: dts.filter(d => /model calls|^turn /.test(d.textContent)).map(d => d.textContent + ": " + d.nextElementSibling.textContent),
			legend: (document.querySelector("#detail .tkey.calls") || {}).textContent || "",
			timing: dts.filter(d => d.textContent == "timing").map(d => d.nextElementSibling.textContent).join(),
		};
	})()`)
	if !strings.HasSuffix(v.Timing, " · waited 350 ms on the provider") {
		t.Errorf("timing row %q: want the time waited on the provider", v.Timing)
	}
	if fmt.Sprint(v.Calls) != "[tcall err tcall tcall]" || v.Legend != "3 model calls" {
		t.Errorf("calls on the timing bar: %q, legend %q", v.Calls, v.Legend)
	}
	if len(v.Titles) == 3 && (!strings.Contains(v.Titles[0], "rate_limit: slow down") || !strings.Contains(v.Titles[1], "100 in / 50 cached / 20 out") || !strings.Contains(v.Titles[2], "cost unknown")) {
		t.Errorf("call titles: %q", v.Titles)
	}
	want := []string{
		"model calls: 3 calls (1 failed) · 110 in / 50 cached / 5 cache write / 22 out tokens · cost unknown",
		"turn 1: 2 calls (1 failed) · 100 in / 50 cached / 5 cache write / 20 out tokens · $0.0012",
		"turn 2: 1 call · 10 in / 0 cached / 0 cache write / 2 out tokens · cost unknown",
	}
	if strings.Join(v.Rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("record head:\n%s\nwant\n%s", strings.Join(v.Rows, "\n"), strings.Join(want, "\n"))
	}
	tb.clean()
}
