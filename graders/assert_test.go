package graders

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"harness/schemas"
)

func TestAssertGrader(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "page.tsx"), []byte("Status: All systems ready\n<a href=\"/dashboard\">Open dashboard</a>\n"), 0o644)
	rec := record(`{"answer": 42}`, "")
	rec.Workspace = &schemas.Workspace{Path: ws, FileChanges: []schemas.FileChange{{Path: "page.tsx", Status: "modified"}}}
	total := int64(500)
	rec.Usage.TotalTokens = &total
	cfg := map[string]any{"type": "assert", "assert": []any{
		map[string]any{"type": "contains", "value": "42"},
		map[string]any{"type": "icontains", "value": "ANSWER"},
		map[string]any{"type": "not-contains", "value": "error"},
		map[string]any{"type": "regex", "value": `"answer":\s*\d+`},
		map[string]any{"type": "starts-with", "value": "{"},
		map[string]any{"type": "is-json"},
		map[string]any{"type": "json-schema", "value": map[string]any{"type": "object", "required": []any{"answer"}}},
		map[string]any{"type": "equals", "value": `{"answer": 42}`},
		map[string]any{"type": "file-exists", "path": "page.tsx"},
		map[string]any{"type": "file-contains", "path": "page.tsx", "value": "Open dashboard"},
		map[string]any{"type": "file-matches", "path": "page.tsx", "regex": `href=["']/dashboard["']`},
		map[string]any{"type": "not-file-matches", "path": "page.tsx", "regex": `(?i)TODO`},
		map[string]any{"type": "files-unchanged", "value": []any{"tests/**", "*.test.ts"}},
		map[string]any{"type": "command-succeeds", "command": []any{"grep", "-q", "ready", "page.tsx"}},
		map[string]any{"type": "tool-called", "value": "Read"},
		map[string]any{"type": "tool-called", "value": "read"},
		map[string]any{"type": "no-tool-errors"},
		map[string]any{"type": "max-tool-calls", "value": 3},
		map[string]any{"type": "max-turns", "value": 1},
		map[string]any{"type": "max-duration", "value": 5000},
		map[string]any{"type": "max-tokens", "value": 1000},
	}}
	b, _ := json.Marshal(cfg)
	g := load(t, writeConfig(t, "a.json", string(b)), Options{})
	r := grade(t, g, rec)
	if r.Error != nil || !r.Pass || r.Score != 1 || len(r.Checks) != 21 {
		for _, c := range r.Checks {
			if !c.Pass {
				t.Errorf("failed: %s (%v)", c.Text, c.Evidence)
			}
		}
		t.Fatalf("all holding: pass %v score %v error %+v", r.Pass, r.Score, r.Error)
	}

	// Failing ones, weighted: the score is the weighted fraction.
	cfg = map[string]any{"type": "assert", "assert": []any{
		map[string]any{"type": "contains", "value": "43", "weight": 3},
		map[string]any{"type": "files-unchanged", "value": "*.tsx"},
		map[string]any{"type": "max-tool-calls", "value": 0},
	}}
	b, _ = json.Marshal(cfg)
	g = load(t, writeConfig(t, "b.json", string(b)), Options{})
	r = grade(t, g, rec)
	if r.Pass || r.Score != 0 || r.Checks[1].Evidence != "page.tsx modified" || r.Checks[2].Evidence != "1" || r.Reasoning != "0 of 3 assertions hold" {
		t.Errorf("failing: %+v", r)
	}
	cfg["assert"] = append(cfg["assert"].([]any), map[string]any{"type": "contains", "value": "42", "weight": 5})
	b, _ = json.Marshal(cfg)
	r = grade(t, load(t, writeConfig(t, "c.json", string(b)), Options{}), rec)
	if r.Pass || r.Score != 0.5 {
		t.Errorf("weighted: pass %v score %v", r.Pass, r.Score)
	}
}

func TestAssertConfigErrors(t *testing.T) {
	for _, c := range []struct{ text, field, msg string }{
		{`{"type":"assert","assert":[]}`, "assert", "non-empty list"},
		{`{"type":"assert","assert":[{"type":"contains"}]}`, "assert[0].value", "missing"},
		{`{"type":"assert","assert":[{"type":"regex","value":"("}]}`, "assert[0].value", "not a regular expression"},
		{`{"type":"assert","assert":[{"type":"contains","value":"x"},{"type":"smells-good"}]}`, "assert[1].type", `unknown assertion "smells-good" (want equals,`},
		{`{"type":"assert","assert":[{"type":"contans","value":"x"}]}`, "assert[0].type", `unknown assertion "contans": did you mean "contains"? (want equals,`},
		{`{"type":"assert","assert":[{"type":"not-contans","value":"x"}]}`, "assert[0].type", `did you mean "not-contains"?`},
		{`{"type":"assert","assert":[{"type":"file-contains","path":"a"}]}`, "assert[0].value", "missing"},
		{`{"type":"assert","assert":[{"type":"contains","value":"x","weight":-1}]}`, "assert[0].weight", "negative"},
	} {
		p := writeConfig(t, "t.json", c.text)
		_, err := Load(p, Options{})
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: err = %v", c.text, err)
			continue
		}
		wantConfigErr(t, err, p, c.field, c.msg)
	}
}
