// Package acpschema carries the ACP v1 JSON Schema (Apache-2.0, from the
// @agentclientprotocol/sdk npm package; see README.md beside it), embedded
// so that tests and tools validate protocol messages without reading
// anything outside the repository.
package acpschema

import _ "embed"

//go:embed schema.v1.json
var v1 []byte

// URL is the resource name under which V1 is usually registered with a
// JSON Schema compiler; its definitions are then URL + "#/$defs/NAME".
const URL = "mem:///acp.schema.v1.json"

// V1 returns the ACP v1 JSON Schema document. The caller must not modify it.
func V1() []byte { return v1 }
