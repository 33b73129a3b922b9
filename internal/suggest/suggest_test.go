package suggest

import "testing"

func TestNearest(t *testing.T) {
	for _, c := range []struct {
		name  string
		known []string
		want  string
	}{
		{"contans", []string{"equals", "contains", "icontains"}, "contains"},
		{"agent", []string{"name", "agents", "target"}, "agents"},
		{"concurency", []string{"concurrency", "k"}, "concurrency"},
		{"agents", []string{"agents"}, ""},           // known: nothing to suggest
		{"x", []string{"k", "j"}, ""},                // one letter of one changed is no likeness
		{"zzzzzz", []string{"agents", "k"}, ""},      // too far from all
		{"regx", []string{"regex", "rego"}, "regex"}, // ties go to the first
	} {
		if got := Nearest(c.name, c.known); got != c.want {
			t.Errorf("Nearest(%q, %q) = %q, want %q", c.name, c.known, got, c.want)
		}
	}
}

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "abc", 3}, {"kitten", "sitting", 3}, {"contans", "contains", 1}, {"same", "same", 0},
		{"inptu", "input", 1}, {"ab", "ba", 1}, {"abc", "", 3}, {"ca", "abc", 3}} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
