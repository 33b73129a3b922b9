// Package cli is harness's command line, the layer above the library: a
// command's table entry ([Command]), the outside world it sees ([Env]),
// the exit statuses and the errors that carry them, the duration flag
// value every command reads durations with, deprecated spellings kept for
// scripts, and the help that groups a command's flags by topic.
//
// Flag names live here and in the commands; no library package below
// names a flag (docs/architecture.md). The offline commands are packages
// of their own under cli/, each a NewCmd returning its [Command]; the
// commands that run agents are in cmd/harness, which also holds main and
// the command table. The commands' behaviour is tested end to end by the
// scripts of cmd/harness (testdata/script), this package's own parts by
// its Go tests.
package cli
