package capture

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"harness/results"
	"harness/schemas"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// normalize zeroes what changes from run to run: times and commands.
func normalize(rec *schemas.CaptureRecord) {
	rec.Timing = schemas.Timing{}
	for i := range rec.Trajectory {
		s := &rec.Trajectory[i]
		s.Timestamp = 0
		if s.Duration != nil {
			s.Duration = new(int64)
		}
	}
	rec.Metadata["agent"] = "fakeagent"
	rec.Provenance.Command = []string{"fakeagent"}
}

// TestGoldenRecords pins the capture record format: every field of the
// records of a few scenarios, byte for byte, once times and paths are
// normalized. Run with -update to rewrite them after a deliberate change.
func TestGoldenRecords(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Settle = 2 * time.Second // the late updates come 20 ms after the answer
	units := cases("full", "permission", "messages", "junk", "crash", "late")
	units[0].Case.Expected = "looks fine"
	units[0].Case.Metadata = map[string]any{"category": "tools"}
	units[0].Case.Extra = map[string]json.RawMessage{"owner": json.RawMessage(`"team-a"`)}
	recs := run(t, cfg, units)
	var buf bytes.Buffer
	for _, r := range recs {
		normalize(r)
		if r.Error != nil {
			r.Error.Stderr = "STDERR"
		}
		b, err := results.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(bytes.ReplaceAll(b, []byte(cfg.Cwd), []byte("CWD")))
		buf.WriteByte('\n')
	}
	checkGolden(t, filepath.Join("testdata", "golden.jsonl"), buf.Bytes())
}

// checkGolden compares records with a golden file (rewritten by -update).
func checkGolden(t *testing.T, golden string, got []byte) {
	t.Helper()
	var buf bytes.Buffer
	buf.Write(got)
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update ./capture to create it)", err, t.Name())
	}
	if !bytes.Equal(buf.Bytes(), want) {
		gotLines, wantLines := bytes.Split(buf.Bytes(), []byte("\n")), bytes.Split(want, []byte("\n"))
		for i := range min(len(gotLines), len(wantLines)) {
			if !bytes.Equal(gotLines[i], wantLines[i]) {
				t.Errorf("record %d differs from %s:\n got %s\nwant %s", i+1, golden, gotLines[i], wantLines[i])
			}
		}
		if len(gotLines) != len(wantLines) {
			t.Errorf("%d records, golden has %d", len(gotLines)-1, len(wantLines)-1)
		}
	}
}

// TestGoldenRecordsMatchJSONSchema validates real records against the
// CaptureRecord schema that `harness schemas --strict` prints: every field
// a record has is declared.
func TestGoldenRecordsMatchJSONSchema(t *testing.T) {
	doc, err := schemas.StrictSchema("CaptureRecord")
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem:///CaptureRecord.json", v); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem:///CaptureRecord.json")
	if err != nil {
		t.Fatal(err)
	}
	var b []byte
	for _, name := range []string{"golden.jsonl", "golden_simuser.jsonl"} {
		f, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, f...)
	}
	n := 0
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(inst); err != nil {
			t.Errorf("record %d fails the CaptureRecord schema: %v", n+1, err)
		}
		n++
	}
	bad, _ := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(`{"id":5,"trajectory":"x"}`)))
	if sch.Validate(bad) == nil {
		t.Error("the schema accepts a record with a numeric id")
	}
}
