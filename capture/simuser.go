package capture

import (
	"context"
	"time"

	"harness/schemas"
	"harness/simuser"
)

// userTalk drives the conversation of a unit whose case has a simulated
// user: the case's input opens it, the user writes the turns after it.
type userTalk struct {
	talk *simuser.Talk
	// opening counts the input's turns (the user's own come after).
	opening int
}

// userTalkOf returns the conversation of a unit whose case names a
// simulated user, else nil. One reply of the user is bounded by the
// case's turn timeout.
func userTalkOf(run *caseRun, timeout time.Duration) *userTalk {
	c := run.unit.Case
	if c.User == nil {
		return nil
	}
	u := &simuser.Exec{Command: c.User.Command, Timeout: timeout}
	return &userTalk{talk: simuser.New(u, c, run.unit.Trial), opening: len(c.Input.List)}
}

// sent notes turn i (0-based) as sent; a turn the user wrote is a step of
// its own on the trajectory.
func (ut *userTalk) sent(run *caseRun, i int, text string) {
	ut.talk.Sent(text)
	if i >= ut.opening {
		run.rec.SimulatedUser(time.Now(), text)
	}
}

// answered notes the agent's answer to turn i and, after the last turn
// so far, asks the user for the next one: ok is false when the
// conversation is over (info is then the user's failure, if it failed).
func (ut *userTalk) answered(ctx context.Context, run *caseRun, i int, last bool, stopReason string) (next string, ok bool, info *schemas.ErrorInfo) {
	ut.talk.Answered(run.rec.TurnOutput(i+1), stopReason)
	if !last {
		return "", true, nil
	}
	next, done, err := ut.talk.Next(ctx)
	if err != nil {
		return "", false, &schemas.ErrorInfo{Class: schemas.ErrUserError, Message: err.Error()}
	}
	if done {
		if o := ut.talk.Outcome(); o.Ended == schemas.UserEndStop {
			run.rec.SimulatedUserStop(time.Now(), o.Reason)
		}
		return "", false, nil
	}
	return next, true, nil
}

// seal puts the conversation on the record: every user turn sent as its
// input, and how the conversation ended.
func (ut *userTalk) seal(run *caseRun) {
	if run.err != nil && ut.talk.Outcome().Ended == "" {
		ut.talk.Failed(run.err.Message)
	}
	o := ut.talk.Outcome()
	if turns := ut.talk.Turns(); len(turns) > 0 {
		run.record.Input = schemas.Turns{List: turns, Multi: true}
		run.record.TurnCount = len(turns)
	}
	run.record.SimulatedUser = &o
}
