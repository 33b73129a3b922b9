package evaluation

import "testing"

func TestSameGraders(t *testing.T) {
	for _, tc := range []struct {
		a, b []string
		same bool
	}{
		{nil, nil, true},
		{[]string{"exec:./a.sh"}, []string{"exec:./a.sh"}, true},
		{[]string{"exec:./a.sh", "judge:j.yaml"}, []string{"judge:j.yaml", "exec:./a.sh"}, true},
		// A suite's resumed run names its files by their absolute path.
		{[]string{"cases:suite.yaml#words"}, []string{"cases:/home/u/evals/suite.yaml#words"}, true},
		{[]string{"exec:./a.sh"}, []string{"exec:./b.sh"}, false},
		{[]string{"exec:./a.sh"}, []string{"js:./a.sh"}, false},
		{[]string{"cases:suite.yaml#words"}, []string{"cases:suite.yaml#other"}, false},
		{[]string{"exec:./a.sh"}, nil, false},
		{[]string{"exec:./a.sh"}, []string{"exec:./a.sh", "exec:./b.sh"}, false},
	} {
		if got := sameGraders(tc.a, tc.b); got != tc.same {
			t.Errorf("sameGraders(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}
