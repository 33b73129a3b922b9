package schemas

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteSchemaFiles(t *testing.T) {
	dir := t.TempDir()
	names := []string{"CaptureRecord", "TrialsRecord"}
	if err := WriteSchemaFiles(dir, names, false, Schema); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "TrialsRecord.json"))
	if want, _ := Schema("TrialsRecord"); err != nil || !bytes.Equal(b, want) {
		t.Fatalf("TrialsRecord.json: err %v, %d bytes; want the schema", err, len(b))
	}
	// A second time, the files exist: nothing is written without force.
	os.WriteFile(filepath.Join(dir, "CaptureRecord.json"), []byte("old"), 0o644)
	err = WriteSchemaFiles(dir, names, false, StrictSchema)
	var exists *FileExistsError
	if !errors.As(err, &exists) || exists.Path != filepath.Join(dir, "CaptureRecord.json") {
		t.Fatalf("err = %v, want a FileExistsError for CaptureRecord.json", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "CaptureRecord.json")); string(b) != "old" {
		t.Errorf("the existing file was overwritten")
	}
	if err := WriteSchemaFiles(dir, names, true, Schema); err != nil {
		t.Fatalf("with force: %v", err)
	}
}

func TestWriteSchemaList(t *testing.T) {
	var b strings.Builder
	if err := WriteSchemaList(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != len(SchemaNames())+len(SchemaAliases()) {
		t.Fatalf("%d lines, want one per name and alias:\n%s", len(lines), b.String())
	}
	if !strings.Contains(b.String(), "acp-harness name of") {
		t.Errorf("no alias listed:\n%s", b.String())
	}
	for _, l := range lines[:len(SchemaNames())] {
		if name, desc, _ := strings.Cut(l, "  "); strings.TrimSpace(desc) == "" {
			t.Errorf("%s has no description", name)
		}
	}
}
