package view

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserArtifactLinks: the trial page links each artifact file to
// /api/artifact (a directory lists its files, a link out is not listed),
// and the link fetches the file's bytes.
func TestBrowserArtifactLinks(t *testing.T) {
	dir := artifactsFixture(t)
	ts := serve(t, newIndex(t, dir), ServerOptions{})
	tb := newTab(t, ts.URL, 1400, 900)
	tb.open("#/")
	tb.route("#/trial?src=out.jsonl&id=task&trial=1")
	tb.waitJS(`document.querySelector("#detail .artifacts a.alink") !== null`)
	type link struct{ Text, Href string }
	links := evalJS[[]link](tb, `[...document.querySelectorAll("#detail .artifacts a.alink")].map(a => ({Text: a.textContent, Href: a.getAttribute("href")}))`)
	var texts []string
	for _, l := range links {
		texts = append(texts, l.Text)
		if !strings.HasPrefix(l.Href, "/api/artifact?") {
			t.Errorf("link %q goes to %q", l.Text, l.Href)
		}
	}
	if strings.Join(texts, "|") != "report.txt|run.log|bin.dat" {
		t.Errorf("artifact links %q", texts)
	}
	items := evalJS[[]string](tb, `[...document.querySelectorAll("#detail .artifacts li.apath")].map(l => l.firstChild.textContent)`)
	if strings.Join(items, "|") != "report.txt|logs|bin.dat|link.txt|up" {
		t.Errorf("artifact entries %q", items)
	}
	got := evalJS[string](tb, `fetch(document.querySelector("#detail .artifacts a.alink").href).then(r => r.text())`, chromedp.EvalAwaitPromise)
	if got != "done\nünïcode\n" {
		t.Errorf("the link fetched %q", got)
	}
	tb.clean()
}
