package schemas

import "bytes"

// IntegrityField is the name of the last field of a record line harness
// wrote: "hmac-sha256:" and the hex HMAC-SHA256 of the line as it was
// before the field was added, keyed by the user's record key. It is
// appended to the encoded line, so the line without it is recovered
// byte for byte.
const IntegrityField = "integrity"

// IntegrityScheme is the prefix of an integrity value.
const IntegrityScheme = "hmac-sha256:"

// integrityPrefix is what precedes the MAC at the end of a signed line.
var integrityPrefix = []byte(`,"` + IntegrityField + `":"` + IntegrityScheme)

// macHexLen is the length of a hex HMAC-SHA256.
const macHexLen = 64

// SplitIntegrity tells a signed line apart: for a line ending in
// ,"integrity":"hmac-sha256:<64 hex digits>"} it returns the line as it was
// before the field was added and the MAC's hex digits; for any other line,
// signed is false.
func SplitIntegrity(line []byte) (body, mac []byte, signed bool) {
	n := len(line)
	tail := len(integrityPrefix) + macHexLen + 2
	if n < tail+1 || line[n-1] != '}' || line[n-2] != '"' {
		return line, nil, false
	}
	start := n - tail
	if !bytes.Equal(line[start:start+len(integrityPrefix)], integrityPrefix) {
		return line, nil, false
	}
	mac = line[start+len(integrityPrefix) : n-2]
	for _, c := range mac {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return line, nil, false
		}
	}
	body = make([]byte, 0, start+1)
	body = append(append(body, line[:start]...), '}')
	return body, mac, true
}

// AppendIntegrity returns line (a JSON object with at least one field,
// ending in "}") with the integrity field holding macHex appended as its
// last field.
func AppendIntegrity(line []byte, macHex string) []byte {
	out := make([]byte, 0, len(line)+len(integrityPrefix)+len(macHex)+2)
	out = append(out, line[:len(line)-1]...)
	out = append(out, integrityPrefix...)
	out = append(out, macHex...)
	return append(out, '"', '}')
}
