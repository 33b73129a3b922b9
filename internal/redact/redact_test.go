package redact

import "testing"

func TestRedact(t *testing.T) {
	r := New([]string{"hunter2hunter2", "abc"}, []string{"OPENAI_API_KEY=sk-live-123456", "PATH=/usr/bin", "MY_TOKEN=tok\"quoted\"xyz", "HOME=/home/user"})
	for in, want := range map[string]string{
		"key sk-live-123456 here":           "key [REDACTED] here",
		"pw hunter2hunter2":                 "pw [REDACTED]",
		`{"v":"tok\"quoted\"xyz"}`:          `{"v":"[REDACTED]"}`,
		"abc is too short to be a secret":   "abc is too short to be a secret",
		"PATH /usr/bin and /home/user stay": "PATH /usr/bin and /home/user stay",
	} {
		if got := r.String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
		if got := string(r.Bytes([]byte(in))); got != want {
			t.Errorf("Bytes(%q) = %q, want %q", in, got, want)
		}
	}
	if !IsSecretName("ANTHROPIC_API_KEY") || !IsSecretName("GITHUB_TOKEN") || IsSecretName("HOME") {
		t.Error("IsSecretName")
	}
}

func TestJSONCatchesEscapedSecrets(t *testing.T) {
	r := New([]string{"sk-live-123456"}, nil)
	in := []byte(`{"a":"plain sk-live-123456","b":"\u0073k-live-123456 escaped","c":"no secret \n here","d":{"e":"sk\u002dlive\u002d123456"}}`)
	got := string(r.JSON(in))
	want := `{"a":"plain [REDACTED]","b":"[REDACTED] escaped","c":"no secret \n here","d":{"e":"[REDACTED]"}}`
	if got != want {
		t.Errorf("JSON:\n got %s\nwant %s", got, want)
	}
	clean := []byte(`{"x":"a\nb","y":[1,2]}`)
	if got := r.JSON(clean); string(got) != string(clean) {
		t.Errorf("a record without secrets changed: %s", got)
	}
}
