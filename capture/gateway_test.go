package capture

import (
	"testing"

	"harness/modelgateway"
)

// Each agent process gets a route on the run's model gateway; once it is
// gone its route is removed, so the gateway of a long run holds only the
// routes of the agents still running: none once the run is over.
func TestRetiredAgentsLeaveNoRoute(t *testing.T) {
	g, err := modelgateway.Start(modelgateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	cfg := testConfig(t)
	cfg.Gateway = g
	cfg.FreshProcess = true // an agent, and a route, a unit
	recs := run(t, cfg, cases("echo a", "echo b", "echo c"))
	for _, rec := range recs {
		if rec.Error != nil {
			t.Fatalf("record %s: %+v", rec.ID, rec.Error)
		}
	}
	if n := g.Routes(); n != 0 {
		t.Fatalf("the gateway holds %d routes after the run, want 0", n)
	}

	// An agent that does not start leaves none either.
	cfg = testConfig(t)
	cfg.Gateway = g
	cfg.Agent = []string{"/nonexistent/agent"}
	r := NewRunner(cfg)
	r.Preflight(t.Context())
	if n := g.Routes(); n != 0 {
		t.Fatalf("the gateway holds %d routes after an agent failed to start, want 0", n)
	}
}
