package schemas

// CalibrationType is the "type" of a CalibrationReport.
const CalibrationType = "calibration"

// CalibrationReport is what calibrate finds (written as markdown by
// default, as JSON with --json): a seeded sample of failures for people to
// review, the health of the grader's scores, how often the grader changes
// its mind on the same record (--repeat), and its agreement with human
// labels (--labels).
type CalibrationReport struct {
	Type      string `json:"type"`
	Results   string `json:"results"`
	Generated string `json:"generated"`
	// Records counts every trial read; Graded those with a verdict;
	// Failures the graded ones that failed.
	Records  int            `json:"records"`
	Graded   int            `json:"graded"`
	Failures int            `json:"failures"`
	Ungraded int            `json:"ungraded,omitempty"`
	Errors   map[string]int `json:"errors,omitempty"`
	// Seed and SampleSize drive the sampling (reservoir sampling, PCG).
	Seed        uint64              `json:"seed"`
	SampleSize  int                 `json:"sampleSize"`
	Grader      string              `json:"grader,omitempty"`
	Samples     []CalibrationSample `json:"samples"`
	Health      GraderHealth        `json:"health"`
	Determinism *Determinism        `json:"determinism,omitempty"`
	Agreement   *Agreement          `json:"agreement,omitempty"`
	// StoredAgreement is, when the trials were graded again (calibrate
	// -g), the agreement of the verdicts stored in the results with the
	// same labels, so the two graders' agreements sit side by side.
	StoredAgreement *Agreement `json:"storedAgreement,omitempty"`
	Warnings        []string   `json:"warnings,omitempty"`
}

// CalibrationSample is one sampled failure, a superset of acp-harness's
// CalibrationSample (id, input, output, expected, originalScore,
// rescoredResult, trajectorySnippet).
type CalibrationSample struct {
	ID                string        `json:"id"`
	Trial             int           `json:"trial,omitempty"`
	Input             string        `json:"input"`
	Output            string        `json:"output"`
	Expected          string        `json:"expected,omitempty"`
	OriginalScore     GraderResult  `json:"originalScore"`
	RescoredResult    *GraderResult `json:"rescoredResult,omitempty"`
	TrajectorySnippet []Step        `json:"trajectorySnippet"`
}

// GraderHealth describes the distribution of a grader's scores over the
// graded trials. TooLenient: most scores (> half) are above 0.9;
// TooStrict: most are below 0.1; NoVariance: their standard deviation is
// below 0.1 (the grader hardly tells outputs apart).
type GraderHealth struct {
	Scores     int            `json:"scores"`
	Mean       float64        `json:"mean"`
	Std        float64        `json:"std"`
	PassRate   float64        `json:"passRate"`
	Above09    float64        `json:"above09"`
	Below01    float64        `json:"below01"`
	Histogram  []HistogramBin `json:"histogram"`
	TooLenient bool           `json:"tooLenient"`
	TooStrict  bool           `json:"tooStrict"`
	NoVariance bool           `json:"noVariance"`
	Notes      []string       `json:"notes,omitempty"`
}

// HistogramBin counts scores in [Low, High) (the last bin includes 1).
type HistogramBin struct {
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
	Count int     `json:"count"`
}

// Determinism is how often a grader, run Repeat times on the same record,
// gave different verdicts: FlipRate = Flipped / Records.
type Determinism struct {
	Grader       string   `json:"grader"`
	Repeat       int      `json:"repeat"`
	Records      int      `json:"records"`
	Flipped      int      `json:"flipped"`
	FlipRate     float64  `json:"flipRate"`
	MeanScoreStd float64  `json:"meanScoreStd"`
	Errors       int      `json:"errors,omitempty"`
	FlippedIDs   []string `json:"flippedIds,omitempty"`
}

// Agreement compares human labels with the grader's verdicts.
type Agreement struct {
	Labels string `json:"labels"`
	// Grader names the grader whose verdicts are compared (the ids of the
	// stored results' graders, or of the grader given to grade them
	// again); Source says which: AgreementStored or AgreementRegraded.
	Grader string `json:"grader"`
	Source string `json:"source"`
	// Items counts the labelled trials compared; Ambiguous those labelled
	// ambiguous and NoVerdict those whose trial has no grader verdict
	// (both left out).
	Items     int   `json:"items"`
	Ambiguous int   `json:"ambiguous,omitempty"`
	NoVerdict int   `json:"noVerdict,omitempty"`
	Kappa     Kappa `json:"kappa"`
	// Disagreements lists the compared trials where the person and the
	// grader differ, in results order.
	Disagreements []Disagreement `json:"disagreements,omitempty"`
}

// Agreement sources: the verdicts stored in the results, or those of the
// grader the trials were graded again with.
const (
	AgreementStored   = "stored"
	AgreementRegraded = "regraded"
)

// Disagreement is one labelled trial on which the person and the grader
// differ: the human label, the grader's verdict ("pass" or "fail") with its
// score and reasoning.
type Disagreement struct {
	ID        string  `json:"id"`
	Trial     int     `json:"trial"`
	Human     string  `json:"human"`
	Verdict   string  `json:"verdict"`
	Score     float64 `json:"score"`
	Reasoning string  `json:"reasoning,omitempty"`
}

// Kappa is Cohen's kappa between two raters (here A = the person, B = the
// grader) with its confusion table: Confusion[i][j] counts items A put in
// Labels[i] and B in Labels[j]. Kappa is null when it is undefined
// (expected agreement 1, as when both raters used a single label).
type Kappa struct {
	Labels    []string `json:"labels"`
	Confusion [][]int  `json:"confusion"`
	Items     int      `json:"items"`
	Observed  float64  `json:"observedAgreement"`
	Expected  float64  `json:"expectedAgreement"`
	Kappa     *float64 `json:"kappa"`
	Note      string   `json:"note,omitempty"`
}
