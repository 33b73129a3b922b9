package schemas

// GraderAgreementType is the "type" of a GraderAgreement.
const GraderAgreementType = "grader-agreement"

// GraderAgreement is what compare says about two results files that hold
// the same trials (the same trajectories, graded twice, as by harness grade
// with two versions of a grader): how the second grading (B) agrees with
// the first (A), trial by trial. Changes are B − A.
type GraderAgreement struct {
	Type string      `json:"type"`
	A    GradingSide `json:"a"`
	B    GradingSide `json:"b"`
	// Trials counts the trials both files hold; Compared those with a
	// verdict in both, NoVerdict those left out (ungraded, an error of the
	// run or of a grader on either side); Agree the compared trials with
	// the same verdict.
	Trials    int `json:"trials"`
	Compared  int `json:"compared"`
	NoVerdict int `json:"noVerdict"`
	Agree     int `json:"agree"`
	// Kappa is Cohen's kappa between the two gradings' verdicts.
	Kappa Kappa `json:"kappa"`
	// MeanScoreChange is the mean of B's score − A's over the compared
	// trials; ScoreChanged counts the compared trials whose score changed.
	MeanScoreChange float64 `json:"meanScoreChange"`
	ScoreChanged    int     `json:"scoreChanged"`
	// Flipped lists the compared trials whose verdict changed, in A's order.
	Flipped []FlippedTrial `json:"flipped"`
}

// GradingSide describes one grading of the trials.
type GradingSide struct {
	File string `json:"file"`
	// Graders are the ids of the graders that gave the verdicts.
	Graders   []string `json:"graders"`
	Graded    int      `json:"graded"`
	Passed    int      `json:"passed"`
	MeanScore float64  `json:"meanScore"`
}

// FlippedTrial is one trial on which the two gradings differ.
type FlippedTrial struct {
	ID     string  `json:"id"`
	Trial  int     `json:"trial"`
	A      string  `json:"a"`
	B      string  `json:"b"`
	ScoreA float64 `json:"scoreA"`
	ScoreB float64 `json:"scoreB"`
}
