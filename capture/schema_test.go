package capture

import (
	"bytes"
	"encoding/json"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"harness/acp"
	"harness/acp/acpschema"
)

// wireLine is one line on the wire, with its direction.
type wireLine struct {
	out  bool
	line string
}

// wireLog collects the lines of a connection through the client's tap.
type wireLog struct {
	mu    sync.Mutex
	lines []wireLine
}

func (w *wireLog) tap(out bool, _ time.Time, line []byte) {
	w.mu.Lock()
	w.lines = append(w.lines, wireLine{out, string(line)})
	w.mu.Unlock()
}

var (
	schemaOnce sync.Once
	schemaComp *jsonschema.Compiler
	schemaErr  error
	schemaMu   sync.Mutex
	schemaDefs = map[string]*jsonschema.Schema{}
)

// schemaDef compiles one $defs entry of the ACP v1 JSON Schema.
func schemaDef(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	schemaOnce.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(acpschema.V1()))
		if err != nil {
			schemaErr = err
			return
		}
		schemaComp = jsonschema.NewCompiler()
		schemaErr = schemaComp.AddResource(acpschema.URL, doc)
	})
	if schemaErr != nil {
		t.Fatalf("ACP schema: %v", schemaErr)
	}
	schemaMu.Lock()
	defer schemaMu.Unlock()
	if s := schemaDefs[name]; s != nil {
		return s
	}
	s, err := schemaComp.Compile(acpschema.URL + "#/$defs/" + name)
	if err != nil {
		t.Fatalf("compile %s: %v", name, err)
	}
	schemaDefs[name] = s
	return s
}

// Schema definitions of what the client sends: params by method, and
// results by the method of the agent request they answer.
var (
	clientParamsDef = map[string]string{
		"initialize": "InitializeRequest", "authenticate": "AuthenticateRequest",
		"session/new": "NewSessionRequest", "session/prompt": "PromptRequest",
		"session/cancel": "CancelNotification",
	}
	clientResultDef = map[string]string{
		"session/request_permission": "RequestPermissionResponse",
		"fs/read_text_file":          "ReadTextFileResponse", "fs/write_text_file": "WriteTextFileResponse",
		"terminal/create": "CreateTerminalResponse", "terminal/output": "TerminalOutputResponse",
		"terminal/wait_for_exit": "WaitForTerminalExitResponse", "terminal/kill": "KillTerminalResponse",
		"terminal/release": "ReleaseTerminalResponse",
	}
)

// validateClientMessages checks every line the client wrote against the
// ACP v1 schema definition for that message.
func validateClientMessages(t *testing.T, w *wireLog) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	agentReq := map[string]string{} // agent request id -> method
	checked := 0
	for _, l := range w.lines {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal([]byte(l.line), &m) != nil {
			if l.out {
				t.Errorf("client wrote invalid JSON: %s", l.line)
			}
			continue
		}
		if !l.out {
			if m.Method != "" && m.ID != nil {
				agentReq[string(m.ID)] = m.Method
			}
			continue
		}
		var def string
		var part json.RawMessage
		switch {
		case m.Method != "":
			def, part = clientParamsDef[m.Method], m.Params
		case m.Error != nil:
			def, part = "Error", m.Error
		default:
			def, part = clientResultDef[agentReq[string(m.ID)]], m.Result
		}
		if def == "" {
			t.Errorf("no schema definition for client message %s", l.line)
			continue
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(part))
		if err != nil {
			t.Errorf("bad JSON in %s", l.line)
			continue
		}
		if err := schemaDef(t, def).Validate(v); err != nil {
			t.Errorf("client message fails the ACP schema (%s): %s\n%v", def, l.line, err)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no client messages to validate")
	}
}

// TestClientMessagesMatchSchema validates everything the client sends in
// scenarios that exercise every client method and answer.
func TestClientMessagesMatchSchema(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Client.FS = &acp.FSOptions{}
	cfg.Client.Terminal = &acp.TerminalOptions{}
	cfg.TurnTimeout = 200 * time.Millisecond
	var w wireLog
	cfg.Client.Tap = w.tap
	os.WriteFile(cfg.Cwd+"/f.txt", []byte("x"), 0o644)
	run(t, cfg, cases("full", "permission", "fs-read f.txt", "fs-write g.txt y", "fs-read ../nope", "terminal echo hi", "slow 2000",
		`{"script":[{"request":{"method":"elicitation/create","params":{"message":"?"}}},{"reportLastAnswer":true}]}`))
	sent := map[string]bool{}
	for _, l := range w.lines {
		var m struct {
			Method string `json:"method"`
			Error  any    `json:"error"`
		}
		json.Unmarshal([]byte(l.line), &m)
		if l.out {
			sent[m.Method] = true
			sent["error"] = sent["error"] || m.Error != nil
		}
	}
	for _, m := range []string{"initialize", "session/new", "session/prompt", "session/cancel", "", "error"} {
		if !sent[m] {
			t.Errorf("no %q message was sent", m)
		}
	}
	validateClientMessages(t, &w)
}

// TestSchemaValidationCanFail makes sure the validation above rejects
// messages that break the schema.
func TestSchemaValidationCanFail(t *testing.T) {
	for def, bad := range map[string]string{
		"NewSessionRequest":         `{"cwd":5,"mcpServers":[]}`,
		"RequestPermissionResponse": `{"outcome":{"outcome":"maybe"}}`,
		"InitializeRequest":         `{"clientCapabilities":{}}`,
	} {
		v, _ := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(bad)))
		if schemaDef(t, def).Validate(v) == nil {
			t.Errorf("%s accepted %s", def, bad)
		}
	}
}
