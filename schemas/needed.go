package schemas

// NeededType is the "type" of a TrialsNeeded report.
const NeededType = "trials-needed"

// TrialsNeeded is what harness trials-needed says about a pilot run: how
// many trials per case a run of the same cases needs for an interval of a
// given width on its headline pass rate and, given a second run, to detect
// a difference of a given size between the two agents.
type TrialsNeeded struct {
	// Type is always NeededType.
	Type string `json:"type"`
	// Pilot describes the pilot run the figures come from.
	Pilot PilotVariance `json:"pilot"`
	// Width is the plan for the headline interval.
	Width *WidthPlan `json:"width,omitempty"`
	// Other and Difference are set when a second run was given: its
	// variance, and the plan for detecting a difference.
	Other      *PilotVariance  `json:"other,omitempty"`
	Difference *DifferencePlan `json:"difference,omitempty"`
	// Warnings says which cases were left out and why.
	Warnings []string `json:"warnings,omitempty"`
}

// PilotVariance is what a pilot run says about its pass rates: Within is
// the mean over cases of p(1−p) (the variance of one trial), Between the
// variance of the true per-case pass rates across cases (the spread more
// trials per case cannot remove).
type PilotVariance struct {
	File       string  `json:"file"`
	Cases      int     `json:"cases"`
	MeanTrials float64 `json:"meanTrials"`
	PassRate   float64 `json:"passRate"`
	Within     float64 `json:"within"`
	Between    float64 `json:"between"`
}

// WidthPlan is the trials per case for a 95% interval of the headline pass
// rate no wider than Width. When Reachable is false no number of trials
// gets there with these cases: Floor is the width with unlimited trials,
// and CasesNeeded the cases (like the pilot's) needed at the pilot's
// trials per case.
type WidthPlan struct {
	Width       float64 `json:"width"`
	Reachable   bool    `json:"reachable"`
	Trials      int     `json:"trials,omitempty"`
	TotalTrials int     `json:"totalTrials,omitempty"`
	Floor       float64 `json:"floor"`
	CasesNeeded int     `json:"casesNeeded,omitempty"`
	// SimulatedWidth is the mean width of the interval harness trials
	// reports, over Simulations simulated runs at Trials per case (absent
	// when not simulated).
	SimulatedWidth *float64 `json:"simulatedWidth,omitempty"`
	Simulations    int      `json:"simulations,omitempty"`
}

// DifferencePlan is the trials per case, for each of two agents run on the
// same cases (a paired design), to detect a difference Delta of their mean
// pass rates with probability Power at two-sided level Alpha. Between is
// the variance across cases of the per-case differences. When Reachable is
// false no number of trials gets there with these cases: Floor is the
// smallest difference detectable with unlimited trials, and CasesNeeded
// the cases needed at the pilot's trials per case.
type DifferencePlan struct {
	Delta        float64 `json:"delta"`
	Power        float64 `json:"power"`
	Alpha        float64 `json:"alpha"`
	Cases        int     `json:"cases"`
	ObservedDiff float64 `json:"observedDiff"`
	Between      float64 `json:"between"`
	Reachable    bool    `json:"reachable"`
	Trials       int     `json:"trials,omitempty"`
	Floor        float64 `json:"floor"`
	CasesNeeded  int     `json:"casesNeeded,omitempty"`
	// SimulatedPower is the share of Simulations simulated pairs of runs
	// at Trials per case whose paired bootstrap interval (as compare
	// reports it, at level 1−Alpha) excludes zero.
	SimulatedPower *float64 `json:"simulatedPower,omitempty"`
	Simulations    int      `json:"simulations,omitempty"`
}
