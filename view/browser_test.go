package view

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"harness/results"
	"harness/rundir"
	"harness/schemas"
)

// These tests open the viewer in a real browser (Debian's chromium,
// headless, driven over the DevTools protocol). Without a browser they are
// skipped, unless HARNESS_REQUIRE_AGENTS is set (as in CI): then they fail.

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

// tab is a headless browser tab that records what the viewer must never
// do: console errors, uncaught exceptions, error log entries and dialogs.
type tab struct {
	t        *testing.T
	ctx      context.Context
	base     string
	mu       sync.Mutex
	problems []string
}

func newTab(t *testing.T, base string, width, height int) *tab {
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
	tb := &tab{t: t, ctx: ctx, base: base}
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
	case *cdppage.EventJavascriptDialogOpening:
		p = fmt.Sprintf("a %s dialog opened: %q (injected script?)", ev.Type, ev.Message)
		go chromedp.Call(tb.ctx, cdppage.HandleJavaScriptDialog, cdppage.HandleJavaScriptDialogParams{Accept: false})
	}
	if p != "" {
		tb.mu.Lock()
		tb.problems = append(tb.problems, p)
		tb.mu.Unlock()
	}
}

// open loads a view (a hash route) and waits until it is rendered.
func (tb *tab) open(hash string) time.Duration {
	tb.t.Helper()
	start := time.Now()
	if err := chromedp.Do(tb.ctx, chromedp.Navigate(tb.base+"/"+hash)); err != nil {
		tb.t.Fatalf("navigate %s: %v", hash, err)
	}
	tb.waitJS(`document.body.getAttribute("data-ready") === "1" || document.body.getAttribute("data-view") === "runs"`)
	return time.Since(start)
}

// route moves to another view within the page.
func (tb *tab) route(hash string) {
	tb.t.Helper()
	evalJS[bool](tb, fmt.Sprintf(`(document.body.removeAttribute("data-ready"), location.hash = %q, true)`, hash))
}

func (tb *tab) waitJS(expr string) {
	tb.t.Helper()
	_, err := chromedp.Run(tb.ctx, chromedp.Poll[chromedp.Void](expr,
		chromedp.WithPollingTimeout(60*time.Second), chromedp.WithPollingInterval(10*time.Millisecond)))
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
	evalJS[bool](tb, `new Promise(r => requestAnimationFrame(() => setTimeout(() => r(true), 50)))`, chromedp.EvalAwaitPromise)
	for _, p := range tb.issues() {
		tb.t.Errorf("browser: %s", p)
	}
}

func (tb *tab) screenshot(path string) {
	tb.t.Helper()
	png, err := chromedp.Run(tb.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		tb.t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		tb.t.Fatal(err)
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

const gridRows = `[...document.querySelectorAll("#grid-rows .grow")].sort((a, b) => a.dataset.pos - b.dataset.pos)`

// fixtureDir lays out the browser tests' results: the report fixtures (two
// runs of the fake agent) and a capture file of the workspace example's
// shape, whose failed check carries the test's message.
func fixtureDir(t *testing.T) string {
	dir := t.TempDir()
	copyFixture(t, dir, "trials_a.jsonl")
	copyFixture(t, dir, "trials_b.jsonl")
	writeRecords(t, filepath.Join(dir, "calc.jsonl"), synthRecord("right", 1, true, 6, 200), synthRecord("wrong", 1, false, 9, 300))
	return dir
}

// TestBrowserView: the runs list, a run's grid sorted and filtered, a
// trial with a check's evidence and keyboard moves, and two runs compared
// with one case side by side.
func TestBrowserView(t *testing.T) {
	dir := fixtureDir(t)
	ix := newIndex(t, dir)
	ts := serve(t, ix, ServerOptions{})
	tb := newTab(t, ts.URL, 1500, 1000)

	tb.open("#/")
	tb.waitJS(`document.querySelectorAll("#runs tbody tr[data-src]").length === 3`)
	srcs := evalJS[[]string](tb, `[...document.querySelectorAll("#runs tbody tr[data-src]")].map(r => r.dataset.src).sort()`)
	if fmt.Sprint(srcs) != "[calc.jsonl trials_a.jsonl trials_b.jsonl]" {
		t.Errorf("runs list: %v", srcs)
	}
	rate := evalJS[string](tb, `document.querySelector('#runs tr[data-src="trials_a.jsonl"] [data-field="rate"]').textContent`)
	if !strings.Contains(rate, "87.2%") || !strings.Contains(rate, "[") {
		t.Errorf("trials_a pass rate with interval: %q", rate)
	}

	// The grid: 56 trials; sorted by duration, longest first.
	tb.click(`#runs a.srclink[href*="trials_a"]`)
	tb.waitJS(`document.body.getAttribute("data-view") === "run" && document.body.getAttribute("data-ready") === "1"`)
	if n := evalJS[string](tb, `document.getElementById("shown-count").textContent`); n != "56 of 56 trials" {
		t.Errorf("grid count %q", n)
	}
	tb.click(`#grid-head .sorth[data-sort="duration"]`)
	tb.waitJS(`location.hash.includes("sort=duration") && document.body.getAttribute("data-ready") === "1"`)
	durs := evalJS[[]float64](tb, `[...document.querySelectorAll("#grid-rows .grow")].sort((a, b) => a.dataset.pos - b.dataset.pos).slice(0, 10).map(r => { const t = r.children[10].textContent; return t.endsWith(" ms") ? parseFloat(t) : t.endsWith(" s") ? 1000 * parseFloat(t) : 60000 * parseFloat(t); })`)
	for i := 1; i < len(durs); i++ {
		if durs[i] > durs[i-1] {
			t.Errorf("sorted by duration, longest first: %v", durs)
			break
		}
	}
	// Filter: failed trials only.
	tb.click(`#filters input[value="fail"]`)
	tb.waitJS(`location.hash.includes("st=fail") && document.body.getAttribute("data-ready") === "1"`)
	sts := evalJS[[]string](tb, gridRows+`.map(r => r.querySelector(".pill").textContent)`)
	if len(sts) == 0 {
		t.Fatal("no failed trials shown")
	}
	for _, s := range sts {
		if s != "fail" {
			t.Errorf("failed filter shows %v", sts)
			break
		}
	}
	// Text filter over input and output.
	evalJS[bool](tb, `(() => { const s = document.getElementById("f-text"); s.value = "answer"; s.dispatchEvent(new Event("input")); return true; })()`)
	tb.waitJS(`location.hash.includes("q=answer") && document.body.getAttribute("data-ready") === "1"`)
	ids := evalJS[[]string](tb, gridRows+`.map(r => r.dataset.id)`)
	for _, id := range ids {
		if id != "wrong-answer" {
			t.Errorf("failed trials with 'answer': %v", ids)
			break
		}
	}

	// A trial: the failed check's evidence; j moves to the next trial.
	tb.route("#/trial?src=calc.jsonl&id=wrong&trial=1")
	tb.waitJS(`document.getElementById("detail") && document.getElementById("detail").getAttribute("data-steps") === "9"`)
	ev := evalJS[string](tb, `document.querySelector("#detail .checks li.failed-check pre.evidence").textContent`)
	if !strings.Contains(ev, "Add(2, 2) = 0, want 4") {
		t.Errorf("evidence shown: %q", ev)
	}
	types := evalJS[[]string](tb, `[...new Set([...document.querySelectorAll("#traj .step")].map(s => s.classList[1]))].sort()`)
	if fmt.Sprint(types) != "[message terminal thought tool_call]" {
		t.Errorf("step types rendered: %v", types)
	}
	if evalJS[int](tb, `document.querySelectorAll("#traj .step.thought details.fold:not([open])").length`) == 0 {
		t.Error("thoughts are not folded")
	}
	if evalJS[int](tb, `document.querySelectorAll("#detail .timing .tseg").length`) == 0 {
		t.Error("no timing bar")
	}
	tb.route("#/trial?src=trials_a.jsonl&id=flaky-echo&trial=1")
	tb.waitJS(`document.getElementById("detail") && document.getElementById("detail").getAttribute("data-trial") === "1" && document.getElementById("detail").getAttribute("data-case") === "flaky-echo"`)
	tb.waitJS(`document.body.getAttribute("data-nav") === "1"`) // the neighbours load beside the trial
	chromedp.Do(tb.ctx, chromedp.KeyEvent("j"))
	tb.waitJS(`location.hash.includes("id=flaky-echo&trial=2") && document.getElementById("detail") && document.getElementById("detail").getAttribute("data-trial") === "2"`)

	// Compare A and B: McNemar, the flips, side by side.
	tb.route("#/compare?src=trials_a.jsonl&src=trials_b.jsonl")
	tb.waitJS(`document.body.getAttribute("data-view") === "compare" && document.body.getAttribute("data-ready") === "1"`)
	txt := evalJS[string](tb, `document.querySelector(".versus").textContent`)
	if !strings.Contains(txt, "McNemar") || !strings.Contains(txt, "paired bootstrap") {
		t.Errorf("comparison: %q", txt)
	}
	flips := evalJS[[]string](tb, `[...document.querySelectorAll(".versus tr.flip")].map(r => r.dataset.case + ":" + r.querySelector(".chg").textContent).sort()`)
	if fmt.Sprint(flips) != "[answer:lost wrong-answer:gained]" {
		t.Errorf("flips: %v", flips)
	}
	tb.click(`.versus tr.flip[data-case="answer"] a.sidelink`)
	tb.waitJS(`document.body.getAttribute("data-view") === "side" && document.body.getAttribute("data-ready") === "1"`)
	tb.waitJS(`document.querySelectorAll(".sidecol").length === 2`)
	first := evalJS[string](tb, `document.getElementById("side-first").getAttribute("data-first")`)
	if first != "0" {
		t.Errorf("first differing step of answer: %s", first)
	}
	tb.waitJS(`document.querySelectorAll(".sidecol .step.diffmark").length === 2`)

	// Three runs: the ranking with Holm-corrected pairs.
	tb.route("#/compare?src=trials_a.jsonl&src=trials_b.jsonl&src=calc.jsonl")
	tb.waitJS(`document.body.getAttribute("data-view") === "compare" && !!document.getElementById("cmp-pairs")`)
	if n := evalJS[int](tb, `document.querySelectorAll("#cmp-pairs tr").length`); n != 4 {
		t.Errorf("pairs table has %d rows, want 1 + 3 pairs", n)
	}
	// Dollars as every harness output writes them: four decimals.
	if got := evalJS[string](tb, `window.HarnessTranscript.usd(0.0154) + " " + window.HarnessTranscript.usd(2.5)`); got != "$0.0154 $2.5000" {
		t.Errorf("usd: %q, want $0.0154 $2.5000 (as cost.Format)", got)
	}
	// Each pair names its two runs and counts the cases each passes alone.
	if row := evalJS[string](tb, `document.querySelectorAll("#cmp-pairs tr")[1].textContent`); strings.Contains(row, "undefined") || !strings.Contains(row, " vs ") {
		t.Errorf("first pair row %q", row)
	}
	tb.clean()
}

// TestBrowserLive: records appended to a results file while the page is
// open show in its grid, pushed, without a reload. Each one's lag is
// measured and logged (the figure is in BENCHMARKS.md); the test fails
// only on a lag no live page could have (10 s), so a starved browser on a
// busy test machine does not fail it, while a page that stopped getting
// events does.
func TestBrowserLive(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "live.jsonl")
	writeRecords(t, p, synthRecord("live-000", 1, true, 3, 100))
	ix, err := New(Options{Roots: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ix.Close)
	ix.Scan()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go ix.Run(ctx)
	ts := serve(t, ix, ServerOptions{})
	tb := newTab(t, ts.URL, 1400, 900)
	tb.open("#/run?src=live.jsonl")
	tb.waitJS(`document.querySelectorAll("#grid-rows .grow").length === 1 && document.getElementById("live").textContent === "live"`)
	// The page notes when each row first appears.
	evalJS[bool](tb, `(() => {
		window.seen = {};
		const note = () => document.querySelectorAll("#grid-rows .grow").forEach(r => { if (!(r.dataset.id in window.seen)) window.seen[r.dataset.id] = Date.now(); });
		new MutationObserver(note).observe(document.getElementById("main"), { childList: true, subtree: true });
		note();
		return true;
	})()`)
	const n = 8
	written := map[string]int64{}
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; i <= n; i++ {
			id := fmt.Sprintf("live-%03d", i)
			var buf strings.Builder
			rec := synthRecord(id, 1, i%3 != 0, 4, 200)
			b, _ := jsonLine(rec)
			buf.Write(b)
			written[id] = time.Now().UnixMilli()
			f.Write([]byte(buf.String()))
			time.Sleep(400 * time.Millisecond)
		}
	}()
	wg.Wait()
	tb.waitJS(fmt.Sprintf(`Object.keys(window.seen).length === %d`, n+1))
	seen := evalJS[map[string]int64](tb, `window.seen`)
	for id, w := range written {
		lag := seen[id] - w
		t.Logf("%s shown %d ms after it was written", id, lag)
		if lag > 10000 {
			t.Errorf("%s showed %d ms after it was written: the page is not live", id, lag)
		}
	}
	tb.clean()
}

func jsonLine(rec schemas.CaptureRecord) ([]byte, error) {
	b, err := results.Marshal(rec)
	return append(b, '\n'), err
}

// TestBrowserHostile: agent output with HTML and script end tags shows as
// text and runs nothing, in the grid and in the trial.
func TestBrowserHostile(t *testing.T) {
	dir := t.TempDir()
	rec := synthRecord(`<img src=x onerror=alert(1)>`, 1, false, 2, 50)
	rec.Output = `<img src=x onerror=alert(2)></script><script>alert(3)</script><b>bold</b>`
	rec.Trajectory[1].Content = mustJSON(`</script><svg onload=alert(4)>`)
	rec.Score.Checks[0].Evidence = `<img src=x onerror=alert(5)>`
	rec.Metadata["category"] = `<i>cat</i>`
	writeRecords(t, filepath.Join(dir, "hostile.jsonl"), rec)
	ix := newIndex(t, dir)
	ts := serve(t, ix, ServerOptions{})
	tb := newTab(t, ts.URL, 1400, 900)
	tb.open("#/run?src=hostile.jsonl")
	out := evalJS[string](tb, `document.querySelector("#grid-rows .grow").children[6].textContent`)
	if out != rec.Output {
		t.Errorf("output cell %q", out)
	}
	tb.route("#/trial?src=hostile.jsonl&id=" + url.QueryEscape(rec.ID) + "&trial=1")
	tb.waitJS(`document.getElementById("detail") && document.getElementById("detail").getAttribute("data-steps") === "2"`)
	type dom struct {
		Imgs, Scripts, Bold, Svg int
		Output, Title            string
	}
	d := evalJS[dom](tb, `({Imgs: document.querySelectorAll("main img").length, Scripts: document.scripts.length, Bold: document.querySelectorAll("main b").length,
		Svg: document.querySelectorAll("main svg").length, Output: document.querySelector("#detail .record > pre").textContent, Title: document.querySelector("h2.caseid").textContent})`)
	if d.Imgs != 0 || d.Scripts != 2 || d.Bold != 0 || d.Svg != 0 || d.Output != rec.Output || d.Title != rec.ID {
		t.Errorf("hostile text became markup: %+v", d)
	}
	tb.clean()
}

// TestViewScreenshots writes the screenshots of docs/view.md when
// HARNESS_VIEW_SCREENSHOTS names the directory to write them to:
//
//	HARNESS_VIEW_SCREENSHOTS=$PWD/docs go test ./view -run Screenshots
func TestViewScreenshots(t *testing.T) {
	out := os.Getenv("HARNESS_VIEW_SCREENSHOTS")
	if out == "" {
		t.Skip("set HARNESS_VIEW_SCREENSHOTS=DIR to write the screenshots of docs/view.md")
	}
	dir := t.TempDir()
	run := filepath.Join(dir, "runs", "20261126T125806Z-example")
	os.MkdirAll(run, 0o755)
	copyFixture(t, run, "trials_a.jsonl")
	copyFixture(t, run, "trials_b.jsonl")
	rate := func(f float64) *float64 { return &f }
	err := rundir.Write(run, &rundir.Manifest{Suite: rundir.Suite{Name: "report-fixtures"}, Started: "2026-11-26T12:58:06Z", Ended: "2026-11-26T12:59:38Z",
		Status: "done", K: 4, Cases: 15, Agents: []rundir.Agent{
			{Name: "before", Output: "trials_a.jsonl", Status: "ok", PassRate: rate(0.872)},
			{Name: "after", Output: "trials_b.jsonl", Status: "ok", PassRate: rate(0.85)}}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../testdata/view/workspace-go.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "workspace-go.jsonl"), b, 0o644)
	t.Chdir(dir)
	ix := newIndex(t, ".")
	ts := serve(t, ix, ServerOptions{})
	tb := newTab(t, ts.URL, 1440, 900)
	a, bb := "runs/20261126T125806Z-example/trials_a.jsonl", "runs/20261126T125806Z-example/trials_b.jsonl"
	shots := []struct{ name, hash, wait string }{
		{"view-runs.png", "#/", `document.querySelectorAll("#runs tbody tr[data-src]").length === 3`},
		{"view-run.png", "#/run?src=" + a + "&sort=status", `document.querySelectorAll("#grid-rows .grow").length > 10`},
		{"view-trial.png", "#/trial?src=workspace-go.jsonl&id=wrong&trial=1", `document.getElementById("detail") && document.getElementById("detail").getAttribute("data-steps") > "0"`},
		{"view-compare.png", "#/compare?src=" + a + "&src=" + bb + "&k=1", `document.querySelectorAll(".versus tr.flip").length === 2`},
		{"view-side.png", "#/side?src=" + a + "&src=" + bb + "&case=answer", `document.querySelectorAll(".sidecol .step.diffmark").length === 2`},
	}
	for _, s := range shots {
		if err := chromedp.Do(tb.ctx, chromedp.Navigate(tb.base+"/"+s.hash)); err != nil {
			t.Fatal(err)
		}
		tb.waitJS(s.wait)
		evalJS[bool](tb, `new Promise(r => setTimeout(() => r(true), 300))`, chromedp.EvalAwaitPromise)
		tb.screenshot(filepath.Join(out, s.name))
	}
	tb.clean()
}
