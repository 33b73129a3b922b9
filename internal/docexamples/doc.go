// Package docexamples holds the test that runs the examples of README.md,
// docs/*.md and examples/*/README.md that work from a checkout as they are
// written, so that the documentation cannot drift from the tool.
//
// An example is runnable from a checkout when it runs the harness from the
// repository (go run ./cmd/harness): a shell code block whose first command
// does, or an inline code span that is such a command. Examples that need a
// real agent, a model or a user's files are not run here; the scripts of
// cmd/harness cover their behaviour with the fixture agents.
package docexamples
