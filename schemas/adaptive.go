package schemas

// AdaptiveCase says how an adaptive trials run treated one case: the
// stopping rule it ran under, why the case stopped, the counts of its first
// MinK trials (which every case gets whatever its outcomes), and an
// estimate of its pass rate that stays unbiased under the stopping rule.
type AdaptiveCase struct {
	// MinK, MaxK and CIWidth are the stopping rule: every case gets MinK
	// trials, then more until its Wilson 95% interval is at most CIWidth
	// wide or it has MaxK trials.
	MinK    int     `json:"minK"`
	MaxK    int     `json:"maxK"`
	CIWidth float64 `json:"ciWidth"`
	// Stop is why the case stopped: "width" (its interval is narrow
	// enough), "max-k" (it reached MaxK trials first) or "ungraded" (none
	// of its first MinK trials got a verdict).
	Stop string `json:"stop"`
	// FirstN and FirstC count the graded and passed trials among trials
	// 1..MinK.
	FirstN int `json:"firstN"`
	FirstC int `json:"firstC"`
	// PassRate is the case's pass rate estimated without the bias of the
	// stopping rule (see Estimator); absent when no trial was graded.
	PassRate *float64 `json:"passRate,omitempty"`
	// Estimator names how PassRate was computed: "rao-blackwell" (from
	// every trial, unbiased under the stopping rule) or "first-min-k" (from
	// the first MinK trials, when some trial was excluded from n).
	Estimator string `json:"estimator,omitempty"`
}

// AdaptiveSummary is the adaptive part of a run's summary: the stopping
// rule, how many cases stopped for each reason, and the trials spent.
type AdaptiveSummary struct {
	MinK    int     `json:"minK"`
	MaxK    int     `json:"maxK"`
	CIWidth float64 `json:"ciWidth"`
	// Stopped counts cases by stop reason ("width", "max-k", "ungraded";
	// "budget" in the summary of a run the budget stopped).
	Stopped map[string]int `json:"stopped"`
	// AtMaxK lists the cases that reached MaxK with their interval still
	// wider than CIWidth.
	AtMaxK []string `json:"atMaxK,omitempty"`
	// Trials counts every trial run; MeanTrials is Trials per case.
	Trials     int     `json:"trials"`
	MeanTrials float64 `json:"meanTrials"`
	// NaivePassRate is passes/graded over every trial: biased under the
	// stopping rule (cases near 0.5 get more trials), shown for contrast.
	NaivePassRate *float64 `json:"naivePassRate,omitempty"`
	// Note says, for people, which figures are unbiased.
	Note string `json:"note"`
}
