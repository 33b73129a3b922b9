// Package evaluation runs an evaluation: every case of a prompts file,
// k trials each, against one agent, graded as it goes, with the run's
// budget and stop rule, resume, shards, adaptive trials, in-order trials
// records and the run summary. It is the engine every command that runs
// an agent calls (capture, trials, run and the shards of a Slurm job):
// they build an [Options] from their flags or suite and call [Run], which
// returns a [Result] with the counts and the summary as Go values.
//
// The name says what the package does for its callers: it evaluates an
// agent. It sits between the commands and the packages that do one part
// of the work each:
//
//	Options ──► Run ──► capture.Runner  (units over workers: agents, sessions, turns, records)
//	             │          │
//	             │          ├─► graders (each record graded beside the next unit)
//	             │          └─► runctl  (budget and stop-on, decided as turns answer)
//	             ├─► results (the output: opened, locked, resumed, written whole)
//	             ├─► trials  (a case's trials record once all its trials are in,
//	             │            written in the order of the prompts file; the summary)
//	             └─► Events  (typed events for the terminal progress and other front ends)
//
// Run reports what happens as [Event] values to [Options.Events], one at a
// time: [Planned] once the units to run are known, [Started] when the agent
// answered initialize, [TurnAnswered], [RecordWritten] and [CaseFinished]
// as work is done, [UnitsAdded] when an adaptive run asks for more trials,
// [StopRequested] when the budget or the stop rule ends the run,
// [Stopping] when the context ends it with units in flight,
// [SummaryWritten], and [Finished] with the Result last; [JSONEvents]
// writes them as JSON lines. Nothing in the package writes to a terminal:
// package termprogress words the events for one, package view serves them
// to a browser, and the commands word errors for their users.
//
// The capture configuration is built from typed values, not flags:
// [CaptureConfig] maps an [AgentOptions] (command, environment, timeouts,
// fs and terminal service, sandbox, graders with their redactor) onto a
// capture.Config without I/O; [AgentEnvironment] makes the agent's
// environment and the secrets to redact; [Prompts.Survey] checks a prompts
// file's cases before an agent starts. Suites (package suiterun) and
// Harbor task sets (package taskset) become the same Options.
//
// [Regrade] is the other way to evaluate: it grades the records of stored
// results files again, without an agent, splicing the new scores into each
// line and recomputing the metrics of trials records (harness grade, with
// [CountRecords], [Sample] and [GradeSingle]). [ReadShards] reads the shard
// files of a distributed run, checked against the prompts and k, and
// [WriteTrials] and [WriteCaptures] write them as one output (harness
// merge).
//
// Errors that a caller must tell apart come as an [*Error] of a [Kind]
// (the output could not be opened, resumed or written, the agent did not
// start, lines harness did not write were found in the output); a run that
// the budget or the stop rule ended, or that was interrupted, is not an
// error: its Result says so.
package evaluation
