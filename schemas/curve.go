package schemas

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// Curve holds a value for each k, keyed "1".."N". It is written with its
// keys in numeric order ("1", "2", ..., "10", not "1", "10", "2") and its
// values to 15 significant digits (0.1, not 0.09999999999999999).
type Curve map[string]float64

// EstimateCurve holds an estimate for each k, keyed "1".."N", written with
// its keys in numeric order.
type EstimateCurve map[string]Estimate

// MarshalJSON writes the curve in numeric key order.
func (c Curve) MarshalJSON() ([]byte, error) {
	return marshalCurve(c, func(v float64) ([]byte, error) { return []byte(shortFloat(v)), nil })
}

// MarshalJSON writes the curve in numeric key order.
func (c EstimateCurve) MarshalJSON() ([]byte, error) {
	return marshalCurve(c, func(e Estimate) ([]byte, error) { return json.Marshal(e) })
}

func marshalCurve[V any](m map[string]V, enc func(V) ([]byte, error)) ([]byte, error) {
	if m == nil {
		return []byte("null"), nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		x, errA := strconv.Atoi(a)
		y, errB := strconv.Atoi(b)
		if errA == nil && errB == nil && x != y {
			return x - y
		}
		return strings.Compare(a, b)
	})
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		vb, err := enc(m[k])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// shortFloat writes v as JSON to 15 significant digits, which drops the
// noise of the last bits of a computed value.
func shortFloat(v float64) string {
	b, _ := json.Marshal(v) // the JSON form of an integral or exact value
	s := strconv.FormatFloat(v, 'g', 15, 64)
	if f, err := strconv.ParseFloat(s, 64); err == nil && f != v {
		// Noise in the last bits: the rounded value, in JSON's form.
		b, _ = json.Marshal(f)
	}
	return string(b)
}
