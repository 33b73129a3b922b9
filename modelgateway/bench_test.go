package modelgateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"harness/modelgateway"
	"harness/testkit/fakemodel"
)

// firstToken measures, per request, the time until the first line of the
// streamed answer arrives, and reports its mean as ns/first-token.
func firstToken(b *testing.B, url string) {
	body := strings.Replace(anthropicBody, "%s", "true", 1)
	var total time.Duration
	for b.Loop() {
		start := time.Now()
		resp, err := http.Post(url+"/v1/messages", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		if _, err := br.ReadString('\n'); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		for {
			if _, err := br.ReadString('\n'); err != nil {
				break
			}
		}
		resp.Body.Close()
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/first-token")
}

// BenchmarkFirstToken compares the time to first token of a streamed
// Anthropic answer straight from the provider and through the gateway.
func BenchmarkFirstToken(b *testing.B) {
	fake := fakemodel.Start(fakemodel.Anthropic, fakemodel.Options{MaxRequests: 1 << 30})
	defer fake.Close()
	b.Run("direct", func(b *testing.B) { firstToken(b, fake.URL) })
	b.Run("gateway", func(b *testing.B) {
		_, _, base := through(b, "ANTHROPIC_BASE_URL", fake.URL)
		firstToken(b, base)
	})
}

// sseServer streams an Anthropic Messages answer of n text deltas, each
// flushed on its own: a long streamed answer.
func sseServer(n int) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n")
		fl.Flush()
		for i := 0; i < n; i++ {
			fmt.Fprint(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"tok \"}}\n\n")
			fl.Flush()
		}
		fmt.Fprintf(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":%d}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", n)
		fl.Flush()
	}))
}

// readStream posts one streamed request and reads the answer to its end,
// counting its events.
func readStream(b *testing.B, url string) int {
	resp, err := http.Post(url+"/v1/messages", "application/json", strings.NewReader(strings.Replace(anthropicBody, "%s", "true", 1)))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	events := 0
	for {
		line, err := br.ReadString('\n')
		if strings.HasPrefix(line, "data: ") {
			events++
		}
		if err != nil {
			return events
		}
	}
}

// BenchmarkStreamedToken times a streamed answer of 2,000 deltas, each
// flushed by the provider, read to its end straight and through the
// gateway, and reports the time per streamed event.
func BenchmarkStreamedToken(b *testing.B) {
	const n = 2000
	srv := sseServer(n)
	defer srv.Close()
	run := func(b *testing.B, url string) {
		var total time.Duration
		events := 0
		for b.Loop() {
			start := time.Now()
			events += readStream(b, url)
			total += time.Since(start)
		}
		b.ReportMetric(float64(total.Nanoseconds())/float64(events), "ns/event")
	}
	b.Run("direct", func(b *testing.B) { run(b, srv.URL) })
	b.Run("gateway", func(b *testing.B) {
		_, _, base := through(b, "ANTHROPIC_BASE_URL", srv.URL)
		run(b, base)
	})
}

// BenchmarkTenThousandCalls makes 10,000 plain calls, straight and through
// the gateway, and reports the heap they left in use (after a GC, against
// before them) and the bytes allocated per call. Through the gateway: one route keeping every
// call's ledger entry, as a run's longest trial would until it ends; and
// 1,000 agents of 10 calls each, whose routes are taken from and removed
// as each agent retires (a long run of short trials), or left in place
// (what the gateway held before agents' routes were removed).
func BenchmarkTenThousandCalls(b *testing.B) {
	fake := fakemodel.Start(fakemodel.Anthropic, fakemodel.Options{MaxRequests: 1 << 30})
	defer fake.Close()
	body := strings.Replace(anthropicBody, "%s", "false", 1)
	const calls = 10000
	call := func(b *testing.B, url string) {
		resp, err := http.Post(url+"/v1/messages", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	measure := func(b *testing.B, run func()) {
		for b.Loop() {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			run()
			runtime.GC()
			runtime.ReadMemStats(&after)
			// What the calls left on the heap: the fake provider's log of
			// requests in every case, and what the gateway keeps.
			b.ReportMetric((float64(after.HeapInuse)-float64(before.HeapInuse))/(1<<20), "retained-MiB")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/calls, "B/call")
		}
	}
	b.Run("direct", func(b *testing.B) {
		measure(b, func() {
			for range calls {
				call(b, fake.URL)
			}
		})
	})
	b.Run("gateway", func(b *testing.B) {
		_, r, base := through(b, "ANTHROPIC_BASE_URL", fake.URL)
		measure(b, func() {
			for range calls {
				call(b, base)
			}
		})
		if n := len(r.Take(time.Now())); n != calls*b.N {
			b.Fatalf("%d calls on the ledger, want %d", n, calls*b.N)
		}
	})
	agents := func(b *testing.B, remove bool) {
		g, err := modelgateway.Start(modelgateway.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer g.Close()
		measure(b, func() {
			for range calls / 10 {
				r := g.NewRoute([]string{"agent"}, []string{"ANTHROPIC_BASE_URL=" + fake.URL})
				base := ""
				for _, kv := range r.Env {
					if v, ok := strings.CutPrefix(kv, "ANTHROPIC_BASE_URL="); ok {
						base = v
					}
				}
				for range 10 {
					call(b, base)
				}
				if n := len(r.Take(time.Now())); n != 10 {
					b.Fatalf("%d calls on the route, want 10", n)
				}
				if remove {
					g.Remove(r)
				}
			}
		})
		b.ReportMetric(float64(g.Routes()), "routes")
	}
	b.Run("gateway-1000-agents-removed", func(b *testing.B) { agents(b, true) })
	b.Run("gateway-1000-agents-kept", func(b *testing.B) { agents(b, false) })
}
