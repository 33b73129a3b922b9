package redact

import (
	"bytes"
	"encoding/json"
)

// Value returns v with every secret redacted from its JSON form, as it
// will be written: a new value decoded from the redacted JSON, or v itself
// when there is nothing to redact (or v does not round-trip through JSON).
func Value[T any](r *Redactor, v *T) *T {
	if !r.Active() || v == nil {
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	clean := r.JSON(b)
	if bytes.Equal(clean, b) {
		return v
	}
	out := new(T)
	if json.Unmarshal(clean, out) != nil {
		return v
	}
	return out
}
