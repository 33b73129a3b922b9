package acp_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"harness/acp"
	"harness/acp/acpschema"
	"harness/schemas"
)

// compileDoc compiles a schema document given as bytes under url.
func compileDoc(t *testing.T, url string, doc []byte, ref string) *jsonschema.Schema {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(url, v); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(url + ref)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// What --mcp-server accepts is encoded as ACP's McpServer and as harness's
// strict McpServerConfig schema say; what they reject, it rejects with the
// field named.
func TestMCPServerMatchesTheProtocol(t *testing.T) {
	strict, err := schemas.StrictSchema("McpServerConfig")
	if err != nil {
		t.Fatal(err)
	}
	ours := compileDoc(t, schemas.SchemaBase+"McpServerConfig.json", strict, "")
	theirs := compileDoc(t, acpschema.URL, acpschema.V1(), "#/$defs/McpServer")
	good := []string{
		`{"name":"calc","command":"/bin/calc","args":["-x"],"env":[{"name":"A","value":"1"}]}`,
		`{"name":"calc","command":"/bin/calc"}`,
		`{"type":"stdio","name":"calc","command":"/bin/calc","args":null,"env":null,"_meta":{"k":1}}`,
		`{"type":"http","name":"web","url":"https://example.test/mcp","headers":[{"name":"Authorization","value":"Bearer x"}]}`,
		`{"type":"sse","name":"events","url":"https://example.test/sse"}`,
	}
	for _, in := range good {
		s, err := acp.ParseMCPServer(in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err := ours.Validate(v); err != nil {
			t.Errorf("%s encodes as %s, which McpServerConfig rejects: %v", in, b, err)
		}
		if err := theirs.Validate(v); err != nil {
			t.Errorf("%s encodes as %s, which ACP rejects: %v", in, b, err)
		}
	}
	bad := map[string]string{
		`{"name":"calc","command":"/bin/calc","url":"x"}`:              "field url",
		`{"type":"http","name":"web","url":"u","command":"c"}`:         "field command",
		`{"type":"http","name":"web"}`:                                 "field url: missing",
		`{"command":"/bin/calc"}`:                                      "field name: missing",
		`{"name":"calc","command":3}`:                                  "field command: want string",
		`{"name":"calc","command":"c","env":[{"value":"1"}]}`:          "has no name",
		`{"type":"grpc","name":"x"}`:                                   "field type",
		`["calc"]`:                                                     "not a JSON object",
		`{"name":"calc","command":"c","args":"-x"}`:                    "field args",
		`{"type":"sse","name":"events","url":"u","headers":{"a":"b"}}`: "field headers",
	}
	for in, want := range bad {
		_, err := acp.ParseMCPServer(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one naming %q", in, err, want)
		}
	}
}
