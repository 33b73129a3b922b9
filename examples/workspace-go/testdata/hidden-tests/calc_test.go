package calc

import "testing"

func TestAdd(t *testing.T) {
	for _, c := range []struct{ a, b, want int }{{2, 2, 4}, {-1, 1, 0}, {40, 2, 42}} {
		if got := Add(c.a, c.b); got != c.want {
			t.Errorf("Add(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestAddZero(t *testing.T) {
	if got := Add(0, 0); got != 0 {
		t.Errorf("Add(0, 0) = %d, want 0", got)
	}
}
