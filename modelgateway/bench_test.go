package modelgateway_test

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"

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
