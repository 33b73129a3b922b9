package limits

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ExecArg is the first argument that makes the harness executable act as
// the wrapper: see ExecMain.
const ExecArg = "__sandbox-exec"

// ExecMain is the wrapper: given the arguments after ExecArg,
// [--cgroup DIR]... [--rlimit data=BYTES] -- COMMAND ARGS..., it moves
// its own process into each cgroup, sets the rlimits, and replaces
// itself with COMMAND (looked up on PATH), keeping its pid and
// environment. So the command and all it starts are capped from their
// first instruction. It returns only on error, with exit status 125.
func ExecMain(args []string) int {
	return execMain(args, os.Stderr, syscall.Exec)
}

type execFunc func(argv0 string, argv []string, env []string) error

func execMain(args []string, stderr io.Writer, execve execFunc) int {
	w, err := parseWrapperArgs(args)
	if err == nil {
		err = w.apply()
	}
	if err == nil {
		var path string
		path, err = exec.LookPath(w.argv[0])
		if err == nil {
			err = execve(path, w.argv, os.Environ())
		}
		err = fmt.Errorf("exec %s: %w", w.argv[0], err)
	}
	fmt.Fprintf(stderr, "harness %s: %v\n", ExecArg, err)
	return 125
}

type wrapper struct {
	cgroups []string
	data    int64 // RLIMIT_DATA, 0 = unchanged
	argv    []string
}

func parseWrapperArgs(args []string) (wrapper, error) {
	var w wrapper
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "--":
			w.argv = args[i+1:]
			if len(w.argv) == 0 {
				return w, errors.New("no command after --")
			}
			return w, nil
		case "--cgroup", "--rlimit":
			if i+1 >= len(args) {
				return w, fmt.Errorf("%s needs a value", a)
			}
			i++
			if a == "--cgroup" {
				if !filepath.IsAbs(args[i]) {
					return w, fmt.Errorf("--cgroup %s: want an absolute path", args[i])
				}
				w.cgroups = append(w.cgroups, args[i])
				continue
			}
			v, ok := strings.CutPrefix(args[i], "data=")
			n, err := strconv.ParseInt(v, 10, 64)
			if !ok || err != nil || n <= 0 {
				return w, fmt.Errorf("--rlimit %s: want data=BYTES", args[i])
			}
			w.data = n
		default:
			return w, fmt.Errorf("unknown argument %q (want --cgroup DIR, --rlimit data=BYTES, then -- and the command)", a)
		}
	}
	return w, errors.New("no -- before the command")
}

// apply joins the cgroups and sets the rlimits; the wrapper gives up on
// the first failure rather than run the command uncapped.
func (w wrapper) apply() error {
	for _, dir := range w.cgroups {
		// "0" is the writing process itself, with all its threads.
		if err := writeFile(filepath.Join(dir, "cgroup.procs"), "0"); err != nil {
			return fmt.Errorf("join cgroup: %w", err)
		}
	}
	if w.data > 0 {
		lim := syscall.Rlimit{Cur: uint64(w.data), Max: uint64(w.data)}
		if err := syscall.Setrlimit(syscall.RLIMIT_DATA, &lim); err != nil {
			return fmt.Errorf("set RLIMIT_DATA to %d: %w", w.data, err)
		}
	}
	return nil
}
