package schemas

// SummaryResult is one line of summarize's JSONL output: a compact view of
// one trial. It is a superset of acp-harness's SummaryResult (id, input,
// output, toolCalls, duration); input is the turns joined with newlines, as
// acp-harness writes it.
type SummaryResult struct {
	ID         string   `json:"id"`
	Input      string   `json:"input"`
	Output     string   `json:"output"`
	ToolCalls  []string `json:"toolCalls"`
	Duration   int64    `json:"duration"`
	Trial      int      `json:"trial,omitempty"`
	Turns      int      `json:"turns,omitempty"`
	Steps      int      `json:"steps"`
	StopReason string   `json:"stopReason,omitempty"`
	ToolErrors bool     `json:"toolErrors"`
	Pass       *bool    `json:"pass,omitempty"`
	Score      *float64 `json:"score,omitempty"`
	// Excluded names why the trial has no verdict: an error class, or
	// "ungraded".
	Excluded string `json:"excluded,omitempty"`
	// Error is the record's or the grader's error message, if any.
	Error string `json:"error,omitempty"`
	// ModelCalls sums the record's ledger of model calls, when it has
	// one: calls, tokens and cost.
	ModelCalls *ModelCallsSummary `json:"modelCalls,omitempty"`
	// Waited is the record's timing.waited: ms spent on the model
	// provider's failures.
	Waited int64 `json:"waited,omitempty"`
}

// ValidationResult is one line of validate-refs output: what the grader said
// about a known-good reference (Kind "reference", it must pass) or a
// known-bad one (Kind "negativeReference", it must fail). It is a superset
// of acp-harness's ValidationResult (id, reference, passes, graderResult):
// Reference holds the text graded, Passes the grader's verdict.
type ValidationResult struct {
	ID           string       `json:"id"`
	Reference    string       `json:"reference"`
	Passes       bool         `json:"passes"`
	GraderResult GraderResult `json:"graderResult"`
	Kind         string       `json:"kind"`
	// Want is "pass" for a reference and "fail" for a negative reference.
	Want string `json:"want"`
	// Correct says the grader judged the answer as it should; false when it
	// misjudged it or failed to grade it.
	Correct bool `json:"correct"`
	// Solve is what a Harbor task's solution/solve.sh did before the
	// verifier ran (the oracle run of validate-refs TASKS only).
	Solve *SolveRun `json:"solve,omitempty"`
	// Network lists the connections solve.sh and the verifier made
	// through the egress allowlist proxy, allowed or refused, each with
	// its phase (a task whose phases have an allowlist only).
	Network []Connection `json:"network,omitempty"`
}

// Connection is one connection a phase of a task's run made through the
// egress allowlist proxy, allowed or refused.
type Connection struct {
	// Phase is "solution" (solve.sh), "verifier" (tests/test.sh) or
	// "setup" (a multi-step task's step setup).
	Phase string `json:"phase"`
	Host  string `json:"host"`
	Port  int    `json:"port"`
	// Allowed says the allowlist let it through; Error says why it
	// failed or was refused.
	Allowed    bool   `json:"allowed"`
	Error      string `json:"error,omitempty"`
	BytesOut   int64  `json:"bytesOut"`
	BytesIn    int64  `json:"bytesIn"`
	DurationMs int64  `json:"durationMs"`
	// Open says it was still open when the phase ended.
	Open bool `json:"open,omitempty"`
}

// SolveRun is what a task's reference solution did: its exit status, whether
// it ran out of time, how long it took and the tail of its output.
type SolveRun struct {
	// ExitCode is solve.sh's exit status (-1 when it timed out).
	ExitCode   int   `json:"exitCode"`
	TimedOut   bool  `json:"timedOut"`
	DurationMs int64 `json:"durationMs"`
	// Output is the tail of its output, stdout and stderr together.
	Output string `json:"output"`
}

// Validation kinds.
const (
	RefPositive = "reference"
	RefNegative = "negativeReference"
)

// BalanceAnalysis is balance's output: how the cases of a prompt set spread
// over the values of a metadata key. It is a superset of acp-harness's
// BalanceAnalysis (totalCases, categories, underrepresented, suggestions).
type BalanceAnalysis struct {
	TotalCases       int                    `json:"totalCases"`
	Categories       []CategoryDistribution `json:"categories"`
	Underrepresented []string               `json:"underrepresented"`
	Suggestions      []string               `json:"suggestions"`
	Key              string                 `json:"key"`
	Threshold        float64                `json:"threshold"`
	// Results names the results file whose pass rates are in Categories.
	Results string `json:"results,omitempty"`
	// UnmatchedResults lists result case ids that are not in the prompts.
	UnmatchedResults []string `json:"unmatchedResults,omitempty"`
}

// CategoryDistribution is one category of a BalanceAnalysis. Percentage is
// the share of cases rounded to a whole percent, as acp-harness computes it.
type CategoryDistribution struct {
	Name       string           `json:"name"`
	Count      int              `json:"count"`
	Percentage float64          `json:"percentage"`
	Results    *CategoryResults `json:"results,omitempty"`
}

// CategoryResults is how a category fared in a results file: trials pooled
// over its cases, with a Wilson 95% interval of the pass rate (which treats
// trials as independent; trials of one case are not).
type CategoryResults struct {
	Cases      int            `json:"cases"`
	Trials     int            `json:"trials"`
	Graded     int            `json:"graded"`
	Passes     int            `json:"passes"`
	PassRate   *float64       `json:"passRate,omitempty"`
	PassRateCI *Interval      `json:"passRateCI,omitempty"`
	Errors     map[string]int `json:"errors,omitempty"`
}

// CalibrationLabel is one line of a human labels file for calibrate
// --labels: the verdict a person gave a trial. Either Pass or Label is set;
// Label is one of "pass", "fail", "valid_failure" (the grader was right to
// fail it), "grader_bug" (it should have passed) or "ambiguous" (left out of
// the agreement). Trial 0 means every trial of the case.
type CalibrationLabel struct {
	ID    string `json:"id"`
	Trial int    `json:"trial,omitempty"`
	Pass  *bool  `json:"pass,omitempty"`
	Label string `json:"label,omitempty"`
	Note  string `json:"note,omitempty"`
}
