// Package capture runs prompt cases against an ACP agent and records what
// the agent did as capture records (one JSON object per case and trial; see
// package schemas for the format).
//
// A Runner keeps one agent process per worker and gives every unit (a case
// and trial) a fresh session and, when a workspace template is set, a fresh
// copy of the workspace. A Recorder turns the session's protocol traffic
// into trajectory steps as it arrives: message and thought chunks merged
// with nothing inserted, tool calls upserted by id, plans replaced, every
// permission, fs and terminal request with the answer given, and anything
// unknown kept raw. Updates that arrive before session/new answers, after
// session/cancel, or after the prompt answers are kept and marked with
// their phase; a finished case's session stays attached for late updates
// for the settle time, while the next cases on the same agent already run,
// so collecting them costs no time.
//
// While a unit runs, each worker prepares the next ones (Config.Warm): their
// workspace copies and sessions on its agent or, when every unit has an
// agent process of its own (a sandbox with workspaces, an image,
// FreshProcess), their agents too, started in their copies or layers. An
// agent the worker is done with retires in the background; Run returns
// once every agent is gone. A Control is told of every turn's answer and
// can stop the run at once.
//
// Failures never lose a record: an agent that crashes, hangs past its
// timeout and the cancel grace, or answers with an error yields a record
// with the trajectory so far, an error class and the agent's stderr tail,
// and the next unit gets a fresh agent process.
package capture
