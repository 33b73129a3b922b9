package schemas

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// FileExistsError refuses to overwrite an existing file.
type FileExistsError struct{ Path string }

func (e *FileExistsError) Error() string { return e.Path + " already exists" }

// WriteSchemaFiles writes the schema of each name, as schemaOf gives it
// (Schema or StrictSchema), to dir/<name>.json, which must exist. An
// existing file stops it before anything is written (a *FileExistsError),
// unless force.
func WriteSchemaFiles(dir string, names []string, force bool, schemaOf func(string) ([]byte, error)) error {
	for _, n := range names {
		p := filepath.Join(dir, n+".json")
		if _, err := os.Stat(p); err == nil && !force {
			return &FileExistsError{Path: p}
		}
	}
	for _, n := range names {
		b, err := schemaOf(n)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, n+".json"), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// AllSchemas is the schema of each name, keyed by name.
func AllSchemas(names []string, schemaOf func(string) ([]byte, error)) (map[string]json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	for _, n := range names {
		b, err := schemaOf(n)
		if err != nil {
			return nil, err
		}
		obj[n] = b
	}
	return obj, nil
}

// WriteSchemaList writes the schema names, one a line, each with the
// first sentence of its description, then acp-harness's names for them.
func WriteSchemaList(w io.Writer) error {
	names := SchemaNames()
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	for _, n := range names {
		if _, err := fmt.Fprintf(w, "%-*s  %s\n", width, n, schemaSummary(n)); err != nil {
			return err
		}
	}
	aliases := SchemaAliases()
	for _, alias := range slices.Sorted(maps.Keys(aliases)) {
		if _, err := fmt.Fprintf(w, "%-*s  acp-harness name of %s\n", width, alias, aliases[alias]); err != nil {
			return err
		}
	}
	return nil
}

// schemaSummary is the first sentence of a schema's description.
func schemaSummary(name string) string {
	b, err := SchemaDoc(name)
	if err != nil {
		return ""
	}
	var d struct {
		Description string `json:"description"`
	}
	_ = json.Unmarshal(b, &d)
	s, _, _ := strings.Cut(d.Description, ". ")
	return strings.TrimSuffix(s, ".")
}
