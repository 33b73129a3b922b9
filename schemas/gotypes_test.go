package schemas

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// entryFields are the fields TrialEntry.MarshalJSON adds to the capture
// record it carries.
type entryFields struct {
	recordFields
	Score        *float64      `json:"score,omitempty"`
	TrialNum     int           `json:"trialNum"`
	Duration     int64         `json:"duration"`
	Pass         *bool         `json:"pass,omitempty"`
	Reasoning    string        `json:"reasoning,omitempty"`
	GraderResult *GraderResult `json:"graderResult,omitempty"`
	Excluded     string        `json:"excluded,omitempty"`
	Events       []Step        `json:"events,omitempty"`
	Format       int           `json:"format,omitempty"`
}

// signed adds the field harness appends to every line it writes (see
// IntegrityField) to the type that writes the rest of the line.
type (
	signedRecord struct {
		recordWire
		Integrity string `json:"integrity,omitempty"`
	}
	signedTrials struct {
		TrialsRecord
		Integrity string `json:"integrity,omitempty"`
	}
	signedSummary struct {
		TrialsSummary
		Integrity string `json:"integrity,omitempty"`
	}
)

// goTypes maps each schema to the Go type whose JSON encoding it
// describes. Types with their own MarshalJSON are given by the shape they
// write (recordWire for CaptureRecord, entryFields for TrialEntry).
// McpServerConfig and the JSON-RPC schemas are written by types outside
// this package and checked in acp's tests, by encoding values.
var goTypes = map[string]reflect.Type{
	"BalanceAnalysis":   reflect.TypeFor[BalanceAnalysis](),
	"CalibrationLabel":  reflect.TypeFor[CalibrationLabel](),
	"CalibrationReport": reflect.TypeFor[CalibrationReport](),
	"CalibrationSample": reflect.TypeFor[CalibrationSample](),
	"CaptureRecord":     reflect.TypeFor[signedRecord](),
	"CompareReport":     reflect.TypeFor[CompareReport](),
	"Cost":              reflect.TypeFor[Cost](),
	"ModelCall":         reflect.TypeFor[ModelCall](),
	"ErrorInfo":         reflect.TypeFor[ErrorInfo](),
	"GraderAgreement":   reflect.TypeFor[GraderAgreement](),
	"GraderResult":      reflect.TypeFor[GraderResult](),
	"Interval":          reflect.TypeFor[Interval](),
	"PromptCase":        reflect.TypeFor[PromptCase](),
	"Ranking":           reflect.TypeFor[Ranking](),
	"Session":           reflect.TypeFor[Session](),
	"TaskStep":          reflect.TypeFor[TaskStep](),
	"SummaryResult":     reflect.TypeFor[SummaryResult](),
	"TrajectoryStep":    reflect.TypeFor[Step](),
	"TrialEntry":        reflect.TypeFor[entryFields](),
	"TrialsRecord":      reflect.TypeFor[signedTrials](),
	"TrialsNeeded":      reflect.TypeFor[TrialsNeeded](),
	"TrialsSummary":     reflect.TypeFor[signedSummary](),
	"ValidationResult":  reflect.TypeFor[ValidationResult](),
}

var checkedElsewhere = []string{"JsonRpcError", "JsonRpcRequest", "JsonRpcResponse", "McpServerConfig", "Suite"}

// Every schema lists exactly the fields of the Go type that writes it, at
// every depth: a field the Go type writes is a property of the schema, a
// property of the schema is a field of the Go type, and a required
// property is one the Go type always writes. Read with
// additionalProperties: false, the schemas therefore accept everything
// harness writes and nothing it does not know.
func TestSchemasMatchGoTypes(t *testing.T) {
	for _, name := range SchemaNames() {
		typ, ok := goTypes[name]
		if !ok {
			if !slices.Contains(checkedElsewhere, name) {
				t.Errorf("schema %s: no Go type is checked against it", name)
			}
			continue
		}
		doc, err := decodeSchema(name)
		if err != nil {
			t.Fatal(err)
		}
		r := &schemaResolver{t: t, docs: map[string]map[string]any{name: doc}}
		r.check(name, typ, doc, name)
	}
}

type schemaResolver struct {
	t    *testing.T
	docs map[string]map[string]any
}

// resolve follows $ref (to another document, a local $defs entry or a
// JSON pointer into a document) until the node has none; doc is the
// document the node is in.
func (r *schemaResolver) resolve(doc string, node map[string]any) (string, map[string]any) {
	for range 10 {
		ref, ok := node["$ref"].(string)
		if !ok {
			if all, ok := node["allOf"].([]any); ok && len(all) > 0 {
				if first, ok := all[0].(map[string]any); ok {
					return r.resolve(doc, first)
				}
			}
			return doc, node
		}
		file, ptr, _ := strings.Cut(ref, "#")
		if file != "" {
			doc = strings.TrimSuffix(file, ".json")
		}
		root, ok := r.docs[doc]
		if !ok {
			d, err := decodeSchema(doc)
			if err != nil {
				r.t.Fatalf("$ref %s: %v", ref, err)
			}
			r.docs[doc], root = d, d
		}
		node = root
		for _, part := range strings.Split(strings.Trim(ptr, "/"), "/") {
			if part == "" {
				continue
			}
			next, ok := node[part].(map[string]any)
			if !ok {
				r.t.Fatalf("$ref %s: no %s", ref, part)
			}
			node = next
		}
	}
	r.t.Fatalf("$ref loop in %s", doc)
	return doc, nil
}

// leaf reports whether a Go type is encoded as a JSON scalar or as data
// harness does not shape (raw JSON, free-form maps).
func leaf(t reflect.Type) bool {
	if t == reflect.TypeFor[json.RawMessage]() || t.Kind() == reflect.Interface {
		return true
	}
	if t.Implements(reflect.TypeFor[json.Marshaler]()) {
		return true
	}
	switch t.Kind() {
	case reflect.Struct:
		return false
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return leaf(t.Elem())
	}
	return true
}

type goField struct {
	typ       reflect.Type
	omitempty bool
}

// jsonFields lists the JSON object keys a struct type writes, flattening
// embedded structs as encoding/json does.
func jsonFields(t reflect.Type) map[string]goField {
	out := map[string]goField{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for k, v := range jsonFields(f.Type) {
				if _, shadowed := out[k]; !shadowed {
					out[k] = v
				}
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = goField{typ: f.Type, omitempty: strings.Contains(opts, "omitempty")}
	}
	// Fields declared at the outer level win over embedded ones.
	for f := range t.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.Anonymous && name != "" && name != "-" {
			out[name] = goField{typ: f.Type, omitempty: strings.Contains(opts, "omitempty")}
		}
	}
	return out
}

func (r *schemaResolver) check(doc string, typ reflect.Type, node map[string]any, where string) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	doc, node = r.resolve(doc, node)
	switch typ.Kind() {
	case reflect.Slice, reflect.Array:
		if leaf(typ.Elem()) {
			return
		}
		items, ok := node["items"].(map[string]any)
		if !ok {
			r.t.Errorf("%s: the Go type is a list of %s, the schema gives no items", where, typ.Elem())
			return
		}
		r.check(doc, typ.Elem(), items, where+"[]")
		return
	case reflect.Map:
		if leaf(typ.Elem()) {
			return
		}
		vals, ok := node["additionalProperties"].(map[string]any)
		if !ok {
			r.t.Errorf("%s: the Go type is a map of %s, the schema gives no additionalProperties", where, typ.Elem())
			return
		}
		r.check(doc, typ.Elem(), vals, where+"{}")
		return
	case reflect.Struct:
	default:
		return
	}
	if leaf(typ) {
		return
	}
	props, _ := node["properties"].(map[string]any)
	if props == nil {
		r.t.Errorf("%s: the schema lists no properties for Go type %s", where, typ)
		return
	}
	fields := jsonFields(typ)
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if _, ok := props[k]; !ok {
			r.t.Errorf("%s: Go type %s writes %q, which the schema does not list", where, typ, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(props)) {
		if p, _ := props[k].(map[string]any); p["writeOnly"] == true {
			continue // read from others, never written by harness
		}
		if _, ok := fields[k]; !ok {
			r.t.Errorf("%s: the schema lists %q, which Go type %s never writes", where, k, typ)
		}
	}
	req, _ := node["required"].([]any)
	for _, k := range req {
		if f, ok := fields[fmt.Sprint(k)]; ok && f.omitempty {
			r.t.Errorf("%s: %q is required but Go type %s may leave it out (omitempty)", where, k, typ)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		p, ok := props[k].(map[string]any)
		if !ok {
			continue
		}
		r.check(doc, fields[k].typ, p, where+"."+k)
	}
}
