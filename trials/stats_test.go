package trials

import (
	"math"
	"math/big"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// exact computes 1 − C(n−c,k)/C(n,k) and C(c,k)/C(n,k) with big integers.
func exact(n, c, k int) (at, exp float64) {
	binom := func(a, b int) *big.Int {
		if b < 0 || b > a {
			return big.NewInt(0)
		}
		return new(big.Int).Binomial(int64(a), int64(b))
	}
	den := binom(n, k)
	fail := new(big.Rat).SetFrac(binom(n-c, k), den)
	all := new(big.Rat).SetFrac(binom(c, k), den)
	one := big.NewRat(1, 1)
	atR, _ := new(big.Rat).Sub(one, fail).Float64()
	expR, _ := all.Float64()
	return atR, expR
}

func TestPassAtKVectors(t *testing.T) {
	tests := []struct {
		n, c, k     int
		at, exp     float64
		tol         float64
		plugInAtK   float64
		plugInCheck bool
	}{
		{10, 3, 5, 11.0 / 12, 0, 1e-12, 0.83193, true},
		{10, 7, 3, 119.0 / 120, 35.0 / 120, 1e-12, 0.973, true},
		{5, 2, 5, 1, 0, 0, 0.92224, true},
		{200, 20, 10, 0.6602, 0, 5e-5, 0.6513, true},
		{10, 0, 1, 0, 0, 0, 0, false},
		{10, 10, 10, 1, 1, 0, 0, false},
		{1, 1, 1, 1, 1, 0, 0, false},
		{1, 0, 1, 0, 0, 0, 0, false},
		{4, 2, 1, 0.5, 0.5, 1e-15, 0, false},
	}
	for _, tt := range tests {
		at, err := PassAtK(tt.n, tt.c, tt.k)
		if err != nil {
			t.Fatalf("PassAtK(%d,%d,%d): %v", tt.n, tt.c, tt.k, err)
		}
		exp, err := PassExpK(tt.n, tt.c, tt.k)
		if err != nil {
			t.Fatalf("PassExpK(%d,%d,%d): %v", tt.n, tt.c, tt.k, err)
		}
		if !near(at, tt.at, tt.tol) {
			t.Errorf("pass@%d(n=%d,c=%d) = %.8f, want %.8f", tt.k, tt.n, tt.c, at, tt.at)
		}
		if !near(exp, tt.exp, tt.tol) {
			t.Errorf("pass^%d(n=%d,c=%d) = %.8f, want %.8f", tt.k, tt.n, tt.c, exp, tt.exp)
		}
		if tt.plugInCheck {
			if p := PlugInPassAtK(tt.n, tt.c, tt.k); !near(p, tt.plugInAtK, 5e-4) {
				t.Errorf("plug-in pass@%d(n=%d,c=%d) = %.5f, want %.5f", tt.k, tt.n, tt.c, p, tt.plugInAtK)
			}
		}
	}
	// The design's six-decimal vectors.
	for _, v := range []struct {
		n, c, k int
		at, exp string
	}{{10, 3, 5, "0.916667", "0.000000"}, {10, 7, 3, "0.991667", "0.291667"}, {5, 2, 5, "1.000000", "0.000000"}} {
		at, _ := PassAtK(v.n, v.c, v.k)
		exp, _ := PassExpK(v.n, v.c, v.k)
		if got := fmtF(at); got != v.at {
			t.Errorf("pass@%d(n=%d,c=%d) = %s, want %s", v.k, v.n, v.c, got, v.at)
		}
		if got := fmtF(exp); got != v.exp {
			t.Errorf("pass^%d(n=%d,c=%d) = %s, want %s", v.k, v.n, v.c, got, v.exp)
		}
	}
}

func fmtF(x float64) string { return big.NewFloat(x).Text('f', 6) }

// The product forms agree with exact big-integer binomials on a grid that
// includes n where uint64 binomials overflow.
func TestPassAtKMatchesBinomials(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 20, 68, 100, 200} {
		for c := 0; c <= n; c += max(1, n/9) {
			for k := 1; k <= n; k += max(1, n/7) {
				at, err := PassAtK(n, c, k)
				if err != nil {
					t.Fatal(err)
				}
				exp, _ := PassExpK(n, c, k)
				wantAt, wantExp := exact(n, c, k)
				if !near(at, wantAt, 1e-9) || !near(exp, wantExp, 1e-9) {
					t.Errorf("n=%d c=%d k=%d: got (%.12f, %.12f), want (%.12f, %.12f)", n, c, k, at, exp, wantAt, wantExp)
				}
			}
		}
	}
}

func TestPassAtKRejectsBadArgs(t *testing.T) {
	for _, a := range [][3]int{{0, 0, 1}, {5, 6, 1}, {5, -1, 1}, {5, 2, 0}, {5, 2, 6}} {
		if _, err := PassAtK(a[0], a[1], a[2]); err == nil {
			t.Errorf("PassAtK%v: no error", a)
		}
		if _, err := PassExpK(a[0], a[1], a[2]); err == nil {
			t.Errorf("PassExpK%v: no error", a)
		}
	}
}

func TestCurves(t *testing.T) {
	at, exp := Curves(4, 2)
	// pass@k: 1 − C(2,k)/C(4,k): k=1: 1−2/4, k=2: 1−1/6, k=3,4: 1.
	wantAt := []float64{0.5, 5.0 / 6, 1, 1}
	// pass^k: C(2,k)/C(4,k): 2/4, 1/6, 0, 0.
	wantExp := []float64{0.5, 1.0 / 6, 0, 0}
	if len(at) != 4 || len(exp) != 4 {
		t.Fatalf("len = %d, %d; want 4", len(at), len(exp))
	}
	for i := range wantAt {
		if !near(at[i], wantAt[i], 1e-12) || !near(exp[i], wantExp[i], 1e-12) {
			t.Errorf("k=%d: got (%v, %v), want (%v, %v)", i+1, at[i], exp[i], wantAt[i], wantExp[i])
		}
	}
	if a, e := Curves(0, 0); a != nil || e != nil {
		t.Errorf("Curves(0,0) = %v, %v; want nil", a, e)
	}
}

func TestWilson(t *testing.T) {
	tests := []struct {
		c, n     int
		low, hi  float64
		decimals float64
	}{
		{7, 10, 0.397, 0.892, 5e-4},
		{5, 5, 0.566, 1, 5e-4},
		{0, 5, 0, 0.434, 5e-4},
		// closed form for c = n/2: centre 1/2 exactly.
		{50, 100, 0.5 - Z95*math.Sqrt(0.25/100+Z95*Z95/40000)/(1+Z95*Z95/100), 0.5 + Z95*math.Sqrt(0.25/100+Z95*Z95/40000)/(1+Z95*Z95/100), 1e-12},
	}
	for _, tt := range tests {
		lo, hi, ok := Wilson(tt.c, tt.n, Z95)
		if !ok || !near(lo, tt.low, tt.decimals) || !near(hi, tt.hi, tt.decimals) {
			t.Errorf("Wilson(%d/%d) = [%.4f, %.4f] ok=%v, want [%.3f, %.3f]", tt.c, tt.n, lo, hi, ok, tt.low, tt.hi)
		}
	}
	if _, _, ok := Wilson(0, 0, Z95); ok {
		t.Error("Wilson(0/0) ok; want not ok")
	}
}

func TestMcNemarExact(t *testing.T) {
	tests := []struct {
		onlyA, onlyB int
		p            float64
	}{
		{1, 6, 2 * (1.0 + 7) / 128}, // 2·P(X≤1), X~Bin(7,½)
		{0, 5, 2.0 / 32},
		{5, 0, 2.0 / 32},
		{3, 3, 1},
		{0, 0, 1},
		{2, 10, 2 * (1.0 + 12 + 66) / 4096},
	}
	for _, tt := range tests {
		var a, b []bool
		for range tt.onlyA {
			a, b = append(a, true), append(b, false)
		}
		for range tt.onlyB {
			a, b = append(a, false), append(b, true)
		}
		// concordant pairs do not change the test
		a, b = append(a, true, false, true), append(b, true, false, true)
		m, err := McNemarExact(a, b)
		if err != nil {
			t.Fatal(err)
		}
		if m.OnlyA != tt.onlyA || m.OnlyB != tt.onlyB || m.BothPass != 2 || m.BothFail != 1 {
			t.Errorf("counts = %+v", m)
		}
		if !near(m.P, tt.p, 1e-12) {
			t.Errorf("McNemar(%d,%d) p = %.10f, want %.10f", tt.onlyA, tt.onlyB, m.P, tt.p)
		}
	}
	// Large counts stay finite: 2·P(X≤400), X~Bin(1000,½) is tiny but > 0.
	if p := BinomialTwoSidedHalf(400, 600); !(p > 0 && p < 1e-9) {
		t.Errorf("BinomialTwoSidedHalf(400,600) = %g", p)
	}
	if _, err := McNemarExact([]bool{true}, nil); err == nil {
		t.Error("mismatched lengths: no error")
	}
}

func TestBootstrap(t *testing.T) {
	v := []float64{0, 0.05, 1, 0.93, 1, 0.5, 0.25, 0.81, 0.02, 0.97}
	lo1, hi1, ok := BootstrapMean(v, 7, 2000, 0.95)
	lo2, hi2, _ := BootstrapMean(v, 7, 2000, 0.95)
	if !ok || lo1 != lo2 || hi1 != hi2 {
		t.Fatalf("same seed gave [%v,%v] and [%v,%v]", lo1, hi1, lo2, hi2)
	}
	m := mean(v)
	if !(lo1 < m && m < hi1) || lo1 < 0 || hi1 > 1 {
		t.Errorf("interval [%v, %v] does not hold the mean %v inside [0,1]", lo1, hi1, m)
	}
	// The standard error of the mean is about 0.14; a 95% interval is
	// about ±0.27 wide.
	if w := hi1 - lo1; w < 0.35 || w > 0.75 {
		t.Errorf("width %v out of the expected range", w)
	}
	lo3, hi3, _ := BootstrapMean(v, 8, 2000, 0.95)
	if lo3 == lo1 && hi3 == hi1 {
		t.Error("different seeds gave identical intervals")
	}
	if lo, hi, _ := BootstrapMean([]float64{0.3, 0.3, 0.3}, 1, 100, 0.95); lo != 0.3 || hi != 0.3 {
		t.Errorf("constant values: [%v, %v]", lo, hi)
	}
	if _, _, ok := BootstrapMean(nil, 1, 100, 0.95); ok {
		t.Error("no values: ok")
	}
	// Paired: b is a shifted by exactly 0.2, so every resample differs by 0.2.
	a := []float64{0.1, 0.5, 0.3, 0.7}
	b := []float64{0.3, 0.7, 0.5, 0.9}
	lo, hi, ok := PairedBootstrapDiff(a, b, 1, 500, 0.95)
	if !ok || !near(lo, 0.2, 1e-12) || !near(hi, 0.2, 1e-12) {
		t.Errorf("paired shift: [%v, %v]", lo, hi)
	}
}

func TestPercentile(t *testing.T) {
	s := []float64{1, 2, 3, 4, 5}
	for _, tt := range []struct{ q, want float64 }{{0, 1}, {1, 5}, {0.5, 3}, {0.25, 2}, {0.1, 1.4}} {
		if got := Percentile(s, tt.q); !near(got, tt.want, 1e-12) {
			t.Errorf("Percentile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
}

func TestCohenKappa(t *testing.T) {
	// 20 pass/pass, 5 pass/fail, 10 fail/pass, 15 fail/fail:
	// po = 0.7, pe = 0.5·0.6 + 0.5·0.4 = 0.5, kappa = 0.4.
	var a, b []string
	add := func(x, y string, n int) {
		for range n {
			a, b = append(a, x), append(b, y)
		}
	}
	add("pass", "pass", 20)
	add("pass", "fail", 5)
	add("fail", "pass", 10)
	add("fail", "fail", 15)
	k, err := CohenKappa(a, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if k.Kappa == nil || !near(*k.Kappa, 0.4, 1e-12) || !near(k.Observed, 0.7, 1e-12) || !near(k.Expected, 0.5, 1e-12) {
		t.Errorf("kappa = %+v", k)
	}
	// labels sorted: fail, pass
	if k.Labels[0] != "fail" || k.Confusion[0][0] != 15 || k.Confusion[0][1] != 10 || k.Confusion[1][0] != 5 || k.Confusion[1][1] != 20 {
		t.Errorf("confusion = %v %v", k.Labels, k.Confusion)
	}
	// Perfect agreement is 1; all-identical labels are undefined, not NaN.
	k, _ = CohenKappa([]string{"a", "b"}, []string{"a", "b"}, nil)
	if k.Kappa == nil || *k.Kappa != 1 {
		t.Errorf("perfect agreement: %+v", k)
	}
	k, _ = CohenKappa([]string{"a", "a"}, []string{"a", "a"}, nil)
	if k.Kappa != nil || k.Note == "" {
		t.Errorf("single label: %+v", k)
	}
	if _, err := CohenKappa([]string{"x"}, []string{"pass"}, []string{"pass", "fail"}); err == nil {
		t.Error("unknown label: no error")
	}
}

func TestClopperPearson(t *testing.T) {
	// Reference values (R: binom.test(c, n)$conf.int).
	for _, tc := range []struct {
		c, n     int
		low, hig float64
	}{
		{12, 12, 0.7353515, 1},
		{0, 12, 0, 0.2646485},
		{3, 10, 0.06673951, 0.6524529},
		{1, 1, 0.025, 1},
	} {
		lo, hi, ok := ClopperPearson(tc.c, tc.n, 0.95)
		if !ok || math.Abs(lo-tc.low) > 1e-6 || math.Abs(hi-tc.hig) > 1e-6 {
			t.Errorf("ClopperPearson(%d, %d) = [%.7f, %.7f] %v, want [%.7f, %.7f]", tc.c, tc.n, lo, hi, ok, tc.low, tc.hig)
		}
	}
	if _, _, ok := ClopperPearson(1, 0, 0.95); ok {
		t.Error("n = 0 gave an interval")
	}
}
