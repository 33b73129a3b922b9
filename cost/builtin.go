package cost

import (
	_ "embed"
	"fmt"

	"go.yaml.in/yaml/v3"
)

//go:embed builtin.yaml
var builtinYAML []byte

// Builtin is the price table shipped with harness and the date its prices
// were taken: what the model call ledger prices calls with when the user
// gives no table of their own.
func Builtin() (Table, string) {
	t, date, err := parseTable("builtin.yaml", builtinYAML)
	if err != nil {
		panic(fmt.Sprintf("the shipped price table: %v", err)) // a build error, caught by the tests
	}
	return t, date
}

// parseTable reads a table whose top level may hold a "date" string beside
// the models.
func parseTable(name string, b []byte) (Table, string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, "", fmt.Errorf("prices %s: must map model names to prices", name)
	}
	t := Table{}
	date := ""
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value == "date" && v.Kind == yaml.ScalarNode {
			date = v.Value
			continue
		}
		p, err := ParsePrice(v)
		if err != nil {
			return nil, "", fmt.Errorf("%s:%d: field %q: %v", name, v.Line, k.Value, err)
		}
		t[k.Value] = p
	}
	return t, date, nil
}
