// Package results owns every file of results harness reads and writes:
// capture records, trials records, graded records, summaries, shards and
// the reports made from them.
//
// Reading: Open takes a path (or "-" for standard input) and decompresses
// zstd and gzip by their content, whatever the file is called.
//
// Writing record streams: OpenOutput opens an output before any agent
// starts and holds an exclusive advisory lock on it for the whole run, so a
// second run on the same file fails at once and names the process that
// holds it. Files are created with mode 0666 less the umask, like every
// Unix tool. What is not a regular file (a FIFO, a device such as
// /dev/stdout) is written through and never replaced; a symlink is
// followed. Each record is written whole and flushed; the first I/O error
// sticks and is returned by every later write, so a run stops on a full
// disk with every record before the error intact.
//
// Resuming: Output.Resume reads the records an earlier run left, keeps the
// ones that count, and, when it has to take some out, replaces the file by
// a copy renamed over it, so no kept record is ever at risk.
//
// Whole files (summaries, review sheets, reports, merged outputs) are
// written with CreateFile: to a temporary file beside the target, renamed
// into place when complete, so a failed command leaves the target as it
// was.
package results
