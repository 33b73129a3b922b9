package schemas

// CompareType is the "type" of a CompareReport.
const CompareType = "compare"

// CompareReport is what compare says about two runs (A, then B) on the same
// cases. Deltas are B − A. Cases that only one run has are listed apart and
// enter no statistic.
type CompareReport struct {
	Type string     `json:"type"`
	A    RunSummary `json:"a"`
	B    RunSummary `json:"b"`
	// K is the k of the pass@k difference.
	K int `json:"k"`
	// CommonCases counts cases present in both runs.
	CommonCases int `json:"commonCases"`
	// OnlyInA and OnlyInB list cases present in one run only.
	OnlyInA []string `json:"onlyInA"`
	OnlyInB []string `json:"onlyInB"`
	// NotComparable lists common cases without a graded trial in a run.
	NotComparable []string `json:"notComparable"`
	// ChangedCases lists common cases whose content (the prompts line,
	// by its hash) differs between the runs: they enter no statistic.
	ChangedCases []string `json:"changedCases,omitempty"`
	// Cases holds the per-case comparison of the common cases, in A's order.
	Cases []CaseDelta `json:"cases"`
	// McNemar is the exact test on per-case outcomes.
	McNemar McNemarResult `json:"mcnemar"`
	// PassAtK is the paired difference of mean pass@K; absent when no common
	// case has K graded trials in both runs.
	PassAtK *DiffEstimate `json:"passAtK,omitempty"`
	// PassRate is the paired difference of mean per-case pass rate (pass@1).
	PassRate *DiffEstimate `json:"passRate,omitempty"`
	// Warnings says which numbers are partial and why.
	Warnings []string `json:"warnings,omitempty"`
}

// RunSummary describes one side of a comparison.
type RunSummary struct {
	File     string   `json:"file"`
	Kind     string   `json:"kind"`
	Cases    int      `json:"cases"`
	Trials   int      `json:"trials"`
	Graded   int      `json:"graded"`
	Passes   int      `json:"passes"`
	PassRate *float64 `json:"passRate,omitempty"`
	// MeanScore is the mean over cases of their graded trials' mean
	// score; absent when no trial has a score.
	MeanScore *float64       `json:"meanScore,omitempty"`
	Ungraded  int            `json:"ungraded,omitempty"`
	Errors    map[string]int `json:"errors,omitempty"`
	// LeftOut counts the trials left out of n by owner (by class for
	// those without one); Failures the trials in n its agent failed with
	// an error of its own, by class.
	LeftOut  map[string]int `json:"leftOut,omitempty"`
	Failures map[string]int `json:"failures,omitempty"`
	// Coverage says what the pass rate is over: "over 48 of 60 trials;
	// 12 left out (infra: 12)".
	Coverage string `json:"coverage"`
	// Covered is the share of the run's trials in n.
	Covered float64 `json:"covered"`
}

// CaseSide is one run's result on one case.
type CaseSide struct {
	N        int            `json:"n"`
	C        int            `json:"c"`
	PassRate *float64       `json:"passRate,omitempty"`
	PassAtK  *float64       `json:"passAtK,omitempty"`
	Pass     *bool          `json:"pass,omitempty"`
	Errors   map[string]int `json:"errors,omitempty"`
}

// CaseDelta compares one case across the runs. Pass is the case's outcome
// for McNemar (a strict majority of its graded trials passed); Change is
// "gained" (fail in A, pass in B), "lost", "same", "not comparable", or
// "changed" (the case itself differs between the runs).
type CaseDelta struct {
	ID     string   `json:"id"`
	A      CaseSide `json:"a"`
	B      CaseSide `json:"b"`
	Delta  *float64 `json:"delta,omitempty"`
	Change string   `json:"change"`
}

// McNemarResult is the exact McNemar test: BothPass and BothFail agree,
// OnlyA passed in A only, OnlyB in B only; PValue is the two-sided exact
// binomial p-value of OnlyA against OnlyB.
type McNemarResult struct {
	Cases    int     `json:"cases"`
	BothPass int     `json:"bothPass"`
	OnlyA    int     `json:"onlyA"`
	OnlyB    int     `json:"onlyB"`
	BothFail int     `json:"bothFail"`
	PValue   float64 `json:"pValue"`
	Method   string  `json:"method"`
}

// DiffEstimate is a paired difference of means over cases, B − A, with a
// percentile bootstrap interval (cases resampled with their pairs).
type DiffEstimate struct {
	K          int     `json:"k"`
	Cases      int     `json:"cases"`
	MeanA      float64 `json:"meanA"`
	MeanB      float64 `json:"meanB"`
	Diff       float64 `json:"diff"`
	Low        float64 `json:"low"`
	High       float64 `json:"high"`
	Confidence float64 `json:"confidence"`
	Seed       uint64  `json:"seed"`
	Resamples  int     `json:"resamples"`
}

// RankingType is the "type" of a Ranking.
const RankingType = "ranking"

// RankedRun is one run of a ranking.
type RankedRun struct {
	File string `json:"file"`
	Rank int    `json:"rank"`
	// MeanPassRate is the mean per-case pass rate over the cases every
	// run graded; Low and High its bootstrap interval.
	MeanPassRate float64 `json:"meanPassRate"`
	Low          float64 `json:"low"`
	High         float64 `json:"high"`
	// Method is "exact" or "none" where the interval is not the
	// bootstrap (every case alike; see Interval).
	Method string `json:"method,omitempty"`
}

// RankPair is McNemar's exact test between two runs (A and B, files of
// the ranking), with the p-value Holm-corrected for the number of pairs.
type RankPair struct {
	A     string `json:"a"`
	B     string `json:"b"`
	OnlyA int    `json:"onlyA"`
	OnlyB int    `json:"onlyB"`
	// P is McNemar's exact p-value, PHolm the same corrected.
	P           float64 `json:"pValue"`
	PHolm       float64 `json:"pHolm"`
	Significant bool    `json:"significant"`
}

// Ranking compares N runs on the cases all of them graded (compare of
// three runs or more, and compare.json of a suite of three agents or
// more).
type Ranking struct {
	Type     string      `json:"type"`
	Cases    int         `json:"cases"`
	Runs     []RankedRun `json:"runs"`
	Pairs    []RankPair  `json:"pairs"`
	Alpha    float64     `json:"alpha"`
	Seed     uint64      `json:"seed"`
	Warnings []string    `json:"warnings,omitempty"`
}
