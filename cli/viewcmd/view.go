// Package viewcmd is harness view: a local web viewer of runs: live, every trajectory, runs compared.
package viewcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"harness/cli"
	"harness/view"
)

// viewOptions are the flags of harness view.
type viewOptions struct {
	host, seed string
	port       portValue
	open       bool
	poll       time.Duration
}

const viewLong = `Serves a viewer of the results under PATH (run directories of harness run,
directories of runs such as runs/, directories of results files, results
files; default .) on http://127.0.0.1 and prints its URL:

  runs      every run found, newest first: agents, pass rate with its Wilson
            interval, cost, status (running, finished, interrupted), progress
  a run     its trials as a grid (input, output, score, checks, error class,
            duration, tokens, cost, steps) to sort by any column and filter:
            failed, flaky, errors, changed against another run, category,
            any metadata key, duration and cost ranges, text
  a trial   the transcript (messages, folded thoughts, tool calls with input
            and output, plans, permissions, terminal, network, file diffs),
            each grader's result with every check's evidence, a timing bar;
            j/k move between trials, n/p between cases
  compare   two or more runs on their common cases: McNemar, paired bootstrap
            intervals, Holm for more than two, the flipped cases ranked by
            evidence, pass@k and pass^k differences, cost and time, and one
            case's two trajectories side by side from their first difference

Every view's state is in its URL. Runs being written show new records
within a second (files are polled, which works on network filesystems;
the shards of a --slurm run show as one run). The server keeps an index of
the records (excerpts and where each is on disk), never whole
trajectories, and serves them a page of steps at a time.

Agent output is shown as text only, under a Content-Security-Policy with no
inline script; no path outside the given ones is served. With --host other
than 127.0.0.1 the URL carries a random token that every request needs.

Examples:
  harness view runs/
  harness view trials.jsonl before.jsonl --open
  harness view /shared/evals --host 0.0.0.0 --port 8080`

// viewExits are the exit statuses of harness view.
const viewExits = `Exit status:
  0    stopped by an interrupt (Ctrl-C), after serving
  1    the server failed while serving
  2    usage or input error: a bad flag, a PATH that does not exist, an
       address or port that cannot be listened on (nothing served)
`

// portValue is --port: a TCP port number, 0 for a free one.
type portValue int

func (p *portValue) String() string { return strconv.Itoa(int(*p)) }
func (p *portValue) Type() string   { return "port" }
func (p *portValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("want a port number, 0 to 65535 (0: a free one)")
	}
	*p = portValue(n)
	return nil
}

// NewCmd returns the harness view command.
func NewCmd() *cli.Command {
	var o viewOptions
	c := &cli.Command{
		Name:  "view",
		Usage: "view [PATH...] [--port N] [--open] [--host ADDR]",
		Short: "a local web viewer of runs: live, every trajectory, runs compared",
		Long:  viewLong,
		Exits: viewExits,
		Flags: pflag.NewFlagSet("view", pflag.ContinueOnError),
	}
	c.Flags.Var(&o.port, "port", "listen on `port` (default: a free one)")
	c.Flags.StringVar(&o.host, "host", "127.0.0.1", "listen on `address`; any other than 127.0.0.1 needs the printed token")
	c.Flags.BoolVar(&o.open, "open", false, "open the URL in a browser (xdg-open)")
	c.Flags.DurationVar(&o.poll, "poll", 250*time.Millisecond, "check the files for new records every `duration`")
	c.Flags.StringVar(&o.seed, "seed", "1", "bootstrap `seed` of the comparisons")
	c.Run = func(ctx context.Context, e *cli.Env, args, agent []string) error {
		return serveView(ctx, e, o, args)
	}
	return c
}

// serveView serves the viewer of the paths args until ctx ends.
func serveView(ctx context.Context, e *cli.Env, o viewOptions, args []string) error {
	sd, err := cli.ParseSeed(o.seed)
	if err != nil {
		return err
	}
	ix, err := view.New(view.Options{Roots: args, Poll: o.poll})
	if err != nil {
		return cli.Input(err)
	}
	for _, a := range args {
		if st, err := os.Stat(a); err == nil && st.Mode().IsRegular() && st.Size() == 0 {
			fmt.Fprintf(e.Stderr, "harness view: %s is empty: it holds no trials yet (they show as they are written)\n", a)
		}
	}
	defer ix.Close()
	opt := view.ServerOptions{Loopback: view.IsLoopback(o.host), Seed: sd}
	if !opt.Loopback {
		if opt.Token, err = view.NewToken(); err != nil {
			return err
		}
	}
	l, err := view.Listen(ix, o.host, int(o.port), opt)
	if errors.Is(err, syscall.EADDRINUSE) {
		return cli.Input(fmt.Errorf("%w\nanother program listens on port %d: give --port another port, or leave --port out for a free one", err, int(o.port)))
	}
	if err != nil {
		return cli.Input(err)
	}
	urls := l.URLs(nil)
	u := urls[0]
	for _, x := range urls {
		fmt.Fprintf(e.Stdout, "harness view: %s\n", x)
	}
	if o.open {
		if p, err := exec.LookPath("xdg-open"); err == nil {
			exec.Command(p, u).Start()
		} else {
			fmt.Fprintln(e.Stderr, "harness view: --open: no xdg-open here; open the URL by hand")
		}
	}
	return l.Serve(ctx)
}
