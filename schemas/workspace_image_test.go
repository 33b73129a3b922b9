package schemas

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestWorkspaceImageGolden pins how a record names its image (reference,
// digest, source), checks it against the JSON Schema, and reads the
// "REF@ID" strings of records written before.
func TestWorkspaceImageGolden(t *testing.T) {
	ws := Workspace{Path: "/tmp/harness-layer-1", Template: "registry.example/tasks/regex-log:20251031", FileChanges: []FileChange{},
		Image:       &ImageInfo{Ref: "registry.example/tasks/regex-log:20251031", Digest: "sha256:" + string(bytes.Repeat([]byte("ab"), 32)), Source: "pulled"},
		ImageSource: ImagePrebuilt}
	got, err := json.MarshalIndent(ws, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "workspace_image.golden.json")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		os.WriteFile(golden, append(got, '\n'), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(got, '\n'), want) {
		t.Fatalf("workspace with an image:\n%s\nwant (%s):\n%s", got, golden, want)
	}
	schema, err := Schema("CaptureRecord")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	json.Unmarshal(schema, &doc)
	wsSchema := doc["properties"].(map[string]any)["workspace"]
	c := jsonschema.NewCompiler()
	if err := c.AddResource("ws.json", wsSchema); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("ws.json")
	if err != nil {
		t.Fatal(err)
	}
	inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(got))
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("the workspace does not validate: %v", err)
	}
	bad, _ := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(`{"path":"/x","image":{"ref":"a","source":"downloaded"}}`)))
	if sch.Validate(bad) == nil {
		t.Fatal("a source outside pulled, built, local validates")
	}
	var old Workspace
	if err := json.Unmarshal([]byte(`{"path":"/x","image":"localhost/base:1@sha256:0123"}`), &old); err != nil {
		t.Fatal(err)
	}
	if old.Image == nil || old.Image.Ref != "localhost/base:1" || old.Image.Digest != "sha256:0123" {
		t.Fatalf("an old record's image string read as %+v", old.Image)
	}
}
