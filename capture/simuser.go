package capture

import (
	"context"
	"time"

	"harness/acp"
	"harness/cost"
	"harness/ledger"
	"harness/schemas"
	"harness/simuser"
)

// userTalk drives the conversation of a unit whose case has a simulated
// user: the case's input opens it, the user writes the turns after it.
type userTalk struct {
	talk  *simuser.Talk
	model *simuser.Model // a model user, for its calls
	// opening counts the input's turns (the user's own come after).
	opening int
}

// userTalkOf returns the conversation of a unit whose case names a
// simulated user, else nil. One reply of an executable user is bounded by
// the case's turn timeout. A model user that cannot be reached as named
// (its key not set) is info. A replay (an agent that asked to be told
// each session's unit) that answered session/new with the recorded
// conversation has its user turns played back: the case's user is not
// asked.
func userTalkOf(run *caseRun, timeout time.Duration, getenv func(string) string) (*userTalk, *schemas.ErrorInfo) {
	c := run.unit.Case
	if c.User == nil {
		return nil, nil
	}
	if run.ag != nil && run.ag.init.WantsUnit() && run.record.Session != nil {
		if m, ok := acp.ReadUserMeta(run.record.Session.Meta); ok {
			u := &simuser.Recorded{Turns: m.Turns, Ended: m.Ended, Reason: m.Reason}
			return &userTalk{talk: simuser.New(u, c, run.unit.Trial), opening: len(c.Input.List)}, nil
		}
	}
	if c.User.IsModel() {
		if c.User.PromptFile != "" {
			return nil, &schemas.ErrorInfo{Class: schemas.ErrUserError, Message: "simulated user: prompt file " + c.User.PromptFile + " was not read"}
		}
		m, err := simuser.NewModel(c.User, getenv, nil)
		if err != nil {
			return nil, &schemas.ErrorInfo{Class: schemas.ErrUserError, Message: "simulated user: " + err.Error()}
		}
		return &userTalk{talk: simuser.New(m, c, run.unit.Trial), model: m, opening: len(c.Input.List)}, nil
	}
	u := &simuser.Exec{Command: c.User.Command, Timeout: timeout}
	return &userTalk{talk: simuser.New(u, c, run.unit.Trial), opening: len(c.Input.List)}, nil
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
		class := schemas.ErrUserError
		if ut.model != nil && ledger.Failure(ut.model.Calls()) != nil {
			// The user's model provider failed its last calls (429,
			// 5xx, a lost connection): the infrastructure's failure,
			// not the configuration's.
			class = schemas.ErrProviderError
		}
		return "", false, &schemas.ErrorInfo{Class: class, Message: err.Error()}
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
// input, how the conversation ended, and a model user's calls, priced.
func (ut *userTalk) seal(run *caseRun, prices cost.Table) {
	if run.err != nil && ut.talk.Outcome().Ended == "" {
		ut.talk.Failed(run.err.Message)
	}
	o := ut.talk.Outcome()
	if ut.model != nil {
		o.Calls = ut.model.Calls()
		for i := range o.Calls {
			o.Calls[i].USD = ledger.Price(&o.Calls[i], prices)
		}
	}
	if turns := ut.talk.Turns(); len(turns) > 0 {
		run.record.Input = schemas.Turns{List: turns, Multi: true}
		run.record.TurnCount = len(turns)
	}
	run.record.SimulatedUser = &o
}
