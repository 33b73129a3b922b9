// Package redact removes secret values (API keys, tokens, values marked
// secret) from text before it is written anywhere.
package redact

import (
	"bytes"
	"encoding/json"
	"regexp"
	"sort"
	"strings"
)

// Mask replaces every secret.
const Mask = "[REDACTED]"

// minSecretLen keeps short values (like "1" or "true") from being treated
// as secrets and blanking out unrelated text.
const minSecretLen = 6

// secretName matches environment variable names that hold credentials.
var secretName = regexp.MustCompile(`(?i)(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE_KEY|ACCESS_KEY)`)

// IsSecretName reports whether an environment variable name looks like it
// holds a credential.
func IsSecretName(name string) bool { return secretName.MatchString(name) }

// Redactor replaces known secret values.
type Redactor struct {
	values []string
}

// New returns a redactor for the given values plus the values of every
// variable in environ ("KEY=VALUE" entries) whose name looks like a
// credential.
func New(values []string, environ []string) *Redactor {
	seen := map[string]bool{}
	r := &Redactor{}
	add := func(v string) {
		if len(v) < minSecretLen || seen[v] {
			return
		}
		seen[v] = true
		r.values = append(r.values, v)
		// The same value as it appears inside a JSON string.
		b, _ := json.Marshal(v)
		if q := string(b[1 : len(b)-1]); q != v && !seen[q] {
			seen[q] = true
			r.values = append(r.values, q)
		}
	}
	for _, v := range values {
		add(v)
	}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok && IsSecretName(k) {
			add(v)
		}
	}
	// Longest first, so a secret containing another is replaced whole.
	sort.Slice(r.values, func(i, j int) bool { return len(r.values[i]) > len(r.values[j]) })
	return r
}

// Active reports whether there is any secret to redact.
func (r *Redactor) Active() bool { return r != nil && len(r.values) > 0 }

// Bytes returns b with every secret replaced; b itself is returned when
// there is nothing to replace.
func (r *Redactor) Bytes(b []byte) []byte {
	if r == nil {
		return b
	}
	for _, v := range r.values {
		if bytes.Contains(b, []byte(v)) {
			b = bytes.ReplaceAll(b, []byte(v), []byte(Mask))
		}
	}
	return b
}

// String returns s with every secret replaced.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	for _, v := range r.values {
		s = strings.ReplaceAll(s, v, Mask)
	}
	return s
}

// JSON returns the JSON text b with every secret replaced, including
// secrets written with escapes inside JSON strings ("\u0073k-..."): each
// string literal holding an escape is decoded, redacted and, when it held
// a secret, written anew; every other byte stays as it was.
func (r *Redactor) JSON(b []byte) []byte {
	if r == nil || len(r.values) == 0 {
		return b
	}
	b = r.Bytes(b)
	if bytes.IndexByte(b, '\\') < 0 {
		return b
	}
	var out []byte
	last := 0
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			continue
		}
		// A string literal: find its end, noting escapes.
		j, escaped := i+1, false
		for j < len(b) && b[j] != '"' {
			if b[j] == '\\' {
				escaped = true
				j++
			}
			j++
		}
		if j >= len(b) {
			break
		}
		if escaped {
			var s string
			if json.Unmarshal(b[i:j+1], &s) == nil {
				if red := r.String(s); red != s {
					enc, _ := json.Marshal(red)
					out = append(out, b[last:i]...)
					out = append(out, enc...)
					last = j + 1
				}
			}
		}
		i = j
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}
