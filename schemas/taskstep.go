package schemas

// TaskStep is one step of a multi-step task (Harbor's [[steps]]) as a
// trial played it: the step's prompt was turn Turn of the trial's one
// session, in the same environment, and its tests ran after it.
type TaskStep struct {
	// Name is the step's name (its directory under steps/).
	Name string `json:"name"`
	// Turn is the 1-based turn of the session that was the step's prompt.
	Turn int `json:"turn"`
	// Reward is the step's reward (its verifier's score); absent when its
	// verifier gave none (see Verdict.error).
	Reward *float64 `json:"reward,omitempty"`
	// Verdict is the step's verifier result; absent when it did not run
	// (the trial was stopped, or the step's setup failed).
	Verdict *GraderResult `json:"verdict,omitempty"`
	// MinReward is the step's min_reward, by reward name ("reward" for a
	// plain number).
	MinReward map[string]float64 `json:"minReward,omitempty"`
	// ContributesToReward says whether the step's reward counts in the
	// trial's.
	ContributesToReward bool `json:"contributesToReward"`
	// EndedTrial says why the trial ended at this step (below its
	// min_reward, the agent's error, its setup's failure); "" when the
	// trial went on or this was its last step.
	EndedTrial string `json:"endedTrial,omitempty"`
	// Error is what went wrong in the step's turn or setup: the agent's
	// error (a timeout, a crash) is also the trial's.
	Error *ErrorInfo `json:"error,omitempty"`
	// Timing is the step's timing.
	Timing TaskStepTiming `json:"timing"`
}

// TaskStepTiming is when a step started (epoch ms) and how long its
// parts took (ms): its setup, the agent's turn, and its verifier.
type TaskStepTiming struct {
	Start    int64 `json:"start"`
	Setup    int64 `json:"setup,omitempty"`
	Agent    int64 `json:"agent"`
	Verifier int64 `json:"verifier,omitempty"`
}
