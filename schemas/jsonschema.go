package schemas

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
)

// The JSON Schema (draft 2020-12) documents of every format, hand-written.
// Each document's $id is SchemaBase + "<Name>.json"; documents refer to one
// another with relative $refs ("GraderResult.json"), and Schema bundles the
// documents a schema refers to into its $defs so every schema it returns
// stands alone.
//
//go:embed jsonschema/*.json
var schemaFS embed.FS

// SchemaBase is the base URI of the $id of every schema document.
const SchemaBase = "https://harness.invalid/schemas/"

// schemaAliases maps acp-harness's registry names to ours.
var schemaAliases = map[string]string{
	"CaptureResult": "CaptureRecord",
	"TrialResult":   "TrialsRecord",
}

// SchemaNames lists the schema documents by name, sorted.
func SchemaNames() []string {
	entries, _ := schemaFS.ReadDir("jsonschema")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".json"))
	}
	slices.Sort(names)
	return names
}

// SchemaAliases returns the acp-harness names harness also accepts, mapped
// to the schema each stands for.
func SchemaAliases() map[string]string {
	return maps.Clone(schemaAliases)
}

// SchemaDoc returns one schema document as written (relative $refs kept).
func SchemaDoc(name string) ([]byte, error) {
	if alias, ok := schemaAliases[name]; ok {
		name = alias
	}
	b, err := schemaFS.ReadFile(path.Join("jsonschema", name+".json"))
	if err != nil {
		return nil, fmt.Errorf("no schema named %q (known: %s)", name, strings.Join(SchemaNames(), ", "))
	}
	return b, nil
}

// Schema returns the named schema as one self-contained document: the
// documents it refers to, directly or not, are embedded under $defs with
// their own $id, so relative $refs resolve inside it (JSON Schema 2020-12
// bundling). Names of acp-harness (CaptureResult, TrialResult) are accepted.
func Schema(name string) ([]byte, error) {
	if alias, ok := schemaAliases[name]; ok {
		name = alias
	}
	root, err := decodeSchema(name)
	if err != nil {
		return nil, err
	}
	deps := map[string]map[string]any{}
	var walk func(v any) error
	walk = func(v any) error {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				if doc, _, _ := strings.Cut(ref, "#"); doc != "" {
					dep := strings.TrimSuffix(doc, ".json")
					if _, seen := deps[dep]; !seen && dep != name {
						d, err := decodeSchema(dep)
						if err != nil {
							return fmt.Errorf("schema %s: $ref %q: %w", name, ref, err)
						}
						delete(d, "$schema")
						deps[dep] = d
						if err := walk(d); err != nil {
							return err
						}
					}
				}
			}
			for _, k := range slices.Sorted(maps.Keys(x)) {
				if err := walk(x[k]); err != nil {
					return err
				}
			}
		case []any:
			for _, e := range x {
				if err := walk(e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return nil, err
	}
	if len(deps) > 0 {
		defs, _ := root["$defs"].(map[string]any)
		if defs == nil {
			defs = map[string]any{}
		}
		for dep, d := range deps {
			if _, clash := defs[dep]; clash {
				return nil, fmt.Errorf("schema %s: $defs already has %q", name, dep)
			}
			defs[dep] = d
		}
		root["$defs"] = defs
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(root); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// StrictSchema is Schema with additionalProperties: false set on every
// object that lists its properties and says nothing of others: it accepts
// what this build writes and rejects any field it does not know. The
// schemas Schema returns stay open, as acp-harness's are, so readers of one
// version accept records of the next.
func StrictSchema(name string) ([]byte, error) {
	b, err := Schema(name)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	closeObjects(doc)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func closeObjects(v any) {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["properties"].(map[string]any); ok {
			if _, set := x["additionalProperties"]; !set {
				x["additionalProperties"] = false
			}
		}
		for _, e := range x {
			closeObjects(e)
		}
	case []any:
		for _, e := range x {
			closeObjects(e)
		}
	}
}

func decodeSchema(name string) (map[string]any, error) {
	b, err := SchemaDoc(name)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	return m, nil
}
