package redact

import "testing"

type record struct {
	ID     string            `json:"id"`
	Output string            `json:"output"`
	Meta   map[string]string `json:"meta,omitempty"`
}

func TestValueRedactsACopy(t *testing.T) {
	r := New([]string{"sk-secret-123"}, nil)
	in := &record{ID: "a", Output: "the key is sk-secret-123", Meta: map[string]string{"k": "sk-secret-123"}}
	out := Value(r, in)
	if out == in {
		t.Fatal("a value holding a secret came back as itself")
	}
	if out.Output != "the key is "+Mask || out.Meta["k"] != Mask || out.ID != "a" {
		t.Fatalf("redacted %+v", out)
	}
	if in.Output != "the key is sk-secret-123" {
		t.Fatalf("the original changed: %+v", in)
	}
}

func TestValueWithoutSecretsIsTheSame(t *testing.T) {
	in := &record{ID: "a", Output: "nothing here"}
	if out := Value(New([]string{"sk-secret-123"}, nil), in); out != in {
		t.Fatal("a value without secrets was copied")
	}
	if out := Value(New(nil, nil), in); out != in {
		t.Fatal("an inactive redactor copied the value")
	}
	if out := Value[record](nil, nil); out != nil {
		t.Fatal("nil in, not nil out")
	}
}
