package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/spf13/pflag"

	"harness/capture"
	"harness/cli"
	"harness/image"
	"harness/results"
	"harness/sandbox/egress"
	"harness/schemas"
	"harness/taskset"
)

// imageFlags are the flags that run cases in task images: --image for
// every case, --tasks for Harbor task directories.
type imageFlags struct {
	ref          string
	tasks        string
	agentInImage bool
	noNetwork    bool
	timeoutScale float64
	// prefetched says the run's images were fetched into the store
	// before this shard was submitted (a --slurm run's tasks): it pulls
	// nothing, and a case whose image the store lacks fails as the
	// infrastructure's, not the run.
	prefetched bool
	task       cli.TaskFlags
	// set is the tasks of --tasks, loaded by taskPrompts.
	set *taskset.Set
}

func (f *imageFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.ref, "image", "", "run every case in a fresh layer over `image`: a root filesystem directory or tar, an OCI layout, a local podman image, an image in a registry (pulled once), or a build context with a Dockerfile (docs/tasks.md)")
	fs.StringVar(&f.tasks, "tasks", "", "run the Harbor task `dir` (or dataset of tasks) instead of a prompts file: each task in its image, graded by its tests/test.sh (docs/tasks.md)")
	fs.BoolVar(&f.agentInImage, "agent-in-image", false, "with --image or --tasks, run the agent command as the image has it instead of binding the host's program in")
	fs.BoolVar(&f.noNetwork, "image-no-network", false, "with --image or --tasks, give the agent loopback only")
	fs.Float64Var(&f.timeoutScale, "task-timeout-scale", 1, "with --tasks, multiply each task's agent and verifier timeouts by `factor` (a slower machine, a slower agent)")
	f.task.Add(fs)
	fs.BoolVar(&f.prefetched, prefetchedFlag, false, "the run's images were fetched before this shard was submitted: pull nothing")
	fs.MarkHidden(prefetchedFlag)
}

// prefetchedFlag is the flag a --slurm run gives its tasks: their images
// were fetched before submission.
const prefetchedFlag = "images-prefetched"

// active says whether cases run in images.
func (f *imageFlags) active() bool { return f.ref != "" || f.tasks != "" }

// taskPrompts reads the tasks of --tasks and, without a prompts file,
// writes their prompts to a temporary file and returns its path ("" when
// the run has a prompts file: its cases name the tasks to run).
func (f *imageFlags) taskPrompts(e *cli.Env, args []string, quiet bool) (string, error) {
	if len(args) > 1 {
		return "", cli.Usagef("--tasks takes at most one prompts file (cases naming the tasks to run): got %d arguments", len(args))
	}
	if f.ref != "" {
		return "", cli.Usagef("--tasks and --image: each task has its own image")
	}
	set, err := cli.LoadTasks(e, f.tasks, quiet)
	if err != nil {
		return "", err
	}
	f.set = set
	if len(args) == 1 {
		return "", nil
	}
	return cli.TempTaskCases(set, f.timeoutScale)
}

// configure makes sure of the images before any agent starts (building
// or pulling them once; an image unpacked again from what is stored is
// unpacked as each trial starts, held until its layer is gone) and sets
// the run's image config. The agent's fs and
// terminal requests cannot be served inside an image: the agent works with
// its own tools there.
func (f *imageFlags) configure(ctx context.Context, e *cli.Env, rf *runFlags, s *runSetup) error {
	if !f.active() && len(s.caseImages) == 0 {
		return nil
	}
	if err := f.check(rf, s); err != nil {
		return err
	}
	store, err := f.task.Store(nil)
	if err != nil {
		return err
	}
	// A shard runs the images resolved before it was submitted; the
	// tasks of a --slurm run read the store the submitting command
	// fetched them into and pull nothing.
	store.CacheFirst = rf.shard != "" || f.prefetched
	if f.prefetched {
		store.Policy = image.PullNever
	}
	// missing are the cases' images this shard's store lacks, by task or
	// reference: their cases fail as the infrastructure's.
	missing := map[string]error{}
	lacking := func(err error) error {
		return fmt.Errorf("%w (the run fetched its images into %s before this shard was submitted, and they are not there now)", err, store.Dir)
	}
	ic := &capture.ImageConfig{Keep: f.task.Keep, AgentInImage: f.agentInImage, NoNetwork: f.noNetwork, TimeoutScale: f.timeoutScale}
	if rf.output != "" && rf.output != "-" {
		// A task's artifacts go beside the output, a directory a trial.
		ic.ArtifactsDir = results.ArtifactsDir(rf.output)
	}
	if err := imageSandbox(ic, rf, s); err != nil {
		return err
	}
	if err := cli.WarnImageCaps(e, ic, rf.quiet); err != nil {
		return err
	}
	cli.WarnOverBudget(e, store, rf.quiet)
	ic.Acquire = store.Acquire
	if f.tasks != "" {
		o := taskset.ResolveOptions{ForceBuild: f.task.ForceBuild}
		if f.prefetched {
			o.Missing = func(task string, err error) { missing[task] = lacking(err) }
		}
		imgs, err := cli.ResolveTaskImages(ctx, e, store, f.set, o, rf.quiet)
		if err != nil {
			return err
		}
		ic.For = f.set.ImageFor(imgs)
		ic.SkillsHome = cli.TaskSkillsHome(e, f.set, s.cfg.Agent, rf.quiet)
		if len(missing) > 0 {
			ic.For = cli.LackingFor(ic.For, func(c *schemas.PromptCase) error { return missing[c.ID] })
		}
	} else {
		// Who uses each image, for the message of one that cannot be had.
		users := map[string][]string{}
		if f.ref != "" {
			users[f.ref] = []string{"--image"}
		}
		s.scan(func(_ int, c *schemas.PromptCase) error {
			if c.Image != "" && len(users[c.Image]) < 3 {
				users[c.Image] = append(users[c.Image], "case "+c.ID)
			}
			return nil
		})
		if err := cli.FetchImages(ctx, e, store, append([]string{f.ref}, s.caseImages...), users, rf.quiet); err != nil {
			return err
		}
		// harness images says which prompts files ran in each image.
		user := ""
		if s.file != "" && s.file != "-" {
			user, _ = filepath.Abs(s.file)
		}
		var onMissing func(ref string, err error)
		if f.prefetched {
			onMissing = func(ref string, err error) { missing[ref] = lacking(err) }
		}
		if ic.For, err = cli.CaseImages(ctx, store, f.ref, s.caseImages, user, onMissing); err != nil {
			return err
		}
		if len(missing) > 0 {
			ic.For = cli.LackingFor(ic.For, func(c *schemas.PromptCase) error {
				if c.Image != "" {
					return missing[c.Image]
				}
				return missing[f.ref]
			})
		}
	}
	// The first agent, started to check that the agent runs, starts in a
	// layer over the first case's image, as that case's agent will (the
	// first case that has its image: the others fail on their own).
	s.scan(func(_ int, c *schemas.PromptCase) error {
		if ic.Probe == nil {
			if _, _, err := ic.For(c); err == nil {
				ic.Probe = c
			}
		}
		return nil
	})
	if ic.Probe != nil {
		if img, _, err := ic.For(ic.Probe); err == nil {
			if img, release, err := store.Acquire(ctx, img); err == nil {
				taskset.WarnOverlay(ctx, cli.ProgressTo(e, rf.quiet), img)
				release()
			}
		}
	}
	s.cfg.Image = ic
	s.cfg.Client.FS, s.cfg.Client.Terminal = nil, nil
	return nil
}

// check refuses the run flags and cases that do not apply to cases in
// images.
func (f *imageFlags) check(rf *runFlags, s *runSetup) error {
	if f.tasks != "" && len(s.caseImages) > 0 {
		return cli.Usagef("a case names an image: with --tasks each task has its own")
	}
	if f.ref == "" && f.tasks == "" && s.casesWithImage < s.cases {
		return cli.Usagef("%d of %d cases name an image and the others none: give --image for them", s.casesWithImage, s.cases)
	}
	for _, c := range []struct {
		set  bool
		flag string
	}{{rf.fs, "--fs"}, {rf.terminal, "--terminal"}, {rf.workspace != "", "--workspace"}, {rf.wsSetup != "", "--workspace-setup"}, {rf.wsPrepare != "", "--workspace-prepare"}, {rf.adapter != "", "--adapter"}} {
		if c.set {
			return cli.Usagef("%s does not apply with --image or --tasks: the agent works inside the image with its own tools", c.flag)
		}
	}
	if s.anyCaseWorkspace {
		return cli.Usagef("a case names a workspace: with --image the image is the case's system")
	}
	if f.tasks != "" && len(rf.graders) > 0 {
		return cli.Usagef("--grader does not apply with --tasks: each task's tests/test.sh is its verifier")
	}
	if f.timeoutScale <= 0 {
		return cli.Usagef("--task-timeout-scale must be positive")
	}
	return nil
}

// imageSandbox gives the agents in images what --sandbox gives the others:
// the --sandbox-memory, -pids, -cpus and -disk caps (their defaults
// unless given) and the --sandbox-network egress rules. An agent whose
// case is not a Harbor task's reaches only its model's endpoints by
// default; a task's agent has the network its task.toml allows (unless
// --sandbox-network says otherwise) and its task's caps.
func imageSandbox(ic *capture.ImageConfig, rf *runFlags, s *runSetup) error {
	caps, err := rf.sandbox.Caps()
	if err != nil {
		return err
	}
	ic.Caps, ic.CgroupParent = &caps, rf.sandbox.Cgroup
	// By default, and for a task without internet, the allowlist is the
	// hosts of the agent's model endpoints.
	rules := egress.DefaultRules(s.cfg.AgentEnv, s.cfg.Agent)
	ic.Network = "allow"
	if rf.sandbox.Network != "" {
		network, allow, err := rf.sandbox.Egress(rf.env, s.cfg.Agent)
		if err != nil {
			return err
		}
		ic.Network, ic.TaskNetwork = network, network
		if network == "allow" {
			rules = allow
		}
	}
	ic.Egress = egress.NewProxy(rules, "")
	return nil
}
