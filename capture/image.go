package capture

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"harness/acp"
	"harness/harbor"
	"harness/image"
	"harness/sandbox"
	"harness/sandbox/egress"
	"harness/sandbox/limits"
	"harness/schemas"
)

// ImageConfig runs every case in a fresh layer over an image: the agent
// (bound in from the host, or already in the image) sees the image as /,
// with the case's changes in its own layer, and for a Harbor task the
// verifier runs in that layer when the agent is done.
type ImageConfig struct {
	// For returns the image a case runs in and, for a Harbor task, the
	// task (its verifier grades the case).
	For func(c *schemas.PromptCase) (*image.Image, *harbor.Task, error)
	// Acquire, when set, has the image For returned unpacked for one
	// trial (image.Store.Acquire) and held until release is called, once
	// the trial's layer is removed (or kept). nil: For's images are
	// unpacked already.
	Acquire func(ctx context.Context, img *image.Image) (got *image.Image, release func(), err error)
	// LayerDir is where layers are made ("" = the system temp dir).
	LayerDir string
	// ArtifactsDir, when set, is where a Harbor task's artifacts are
	// copied after each trial: ArtifactsDir/<case id>-t<trial>/.
	ArtifactsDir string
	// Keep leaves each layer on disk.
	Keep bool
	// AgentInImage runs the agent command as the image has it, without
	// binding the host's program in.
	AgentInImage bool
	// NoNetwork gives the agent loopback only.
	NoNetwork bool
	// Network is the network of an agent whose case is not a Harbor
	// task's: "allow" (only the hosts of Egress's allowlist, through it),
	// "none" (loopback only) or "host" ("" = host).
	Network string
	// TaskNetwork is the network of the agent of a Harbor task that
	// allows internet ("" = host); a task with allow_internet = false
	// gets "allow", or "none" when this says so.
	TaskNetwork string
	// Caps cap the agent of a case that is not a Harbor task's, and all
	// it starts (nil: no caps); a task's agent gets the task's memory,
	// cpus and storage, and the processes cap of Caps.
	Caps *limits.Caps
	// CgroupParent is where the caps' cgroups are made ("" = found).
	CgroupParent string
	// Egress, when set, is the way out of a task with allow_internet =
	// false: the agent reaches the hosts of its allowlist (its model's
	// endpoints, and a network_mode = "allowlist" task's allowed_hosts)
	// through it and nothing else. Without it such a task's agent gets
	// loopback only.
	Egress *egress.Proxy
	// Self is the command that runs image.Main (default: this binary).
	Self []string
	// TimeoutScale multiplies a task's verifier timeout (0 = 1); the
	// agent's is the case's timeout.
	TimeoutScale float64
	// SkillsHome is where the agent reads its user-level skills, relative
	// to its HOME (".claude/skills"): a Harbor task's skills_dir is copied
	// there in the case's layer before the agent starts. "" for an agent
	// whose layout is not known: nothing is copied.
	SkillsHome string
	// Probe is the case in whose image the run's first agent is started
	// and initialized, to check that the agent runs before any output is
	// written (nil: no check). No agent of an image run starts on the
	// host.
	Probe *schemas.PromptCase
}

// imagePreflight starts the agent in a fresh layer over the probe case's
// image, initializes it, and removes it and the layer.
func (r *Runner) imagePreflight(ctx context.Context) (*acp.InitializeResponse, error) {
	ic := r.cfg.Image
	if ic.Probe == nil {
		return &acp.InitializeResponse{}, nil
	}
	img, task, err := ic.For(ic.Probe)
	if err == nil {
		var release func()
		if img, release, err = ic.acquire(ctx, img); err == nil {
			defer release()
		}
	}
	if err != nil {
		return nil, &AgentError{Info: schemas.ErrorInfo{Class: schemas.ErrWorkspaceSetup, Message: fmt.Sprintf("starting the agent in case %s's image: %v", ic.Probe.ID, err)}}
	}
	l, err := image.NewLayer(img, ic.LayerDir)
	if err != nil {
		return nil, &AgentError{Info: schemas.ErrorInfo{Class: schemas.ErrWorkspaceSetup, Message: fmt.Sprintf("starting the agent in image %s (case %s): a layer: %v", img.Ref, ic.Probe.ID, err)}}
	}
	defer l.Remove()
	l.Self = ic.Self
	cl := &caseLayer{layer: l, task: task, workdir: img.Workdir()}
	ag, info := r.startAgentWith(ctx, l.Dir, &layerRunner{cl: cl, cfg: ic})
	if info != nil {
		return nil, &AgentError{Info: *info}
	}
	ag.kill()
	r.dropRoute(ag.route)
	return ag.init, nil
}

// acquire has img unpacked and held for one trial (Acquire), or returns
// it as it is.
func (ic *ImageConfig) acquire(ctx context.Context, img *image.Image) (*image.Image, func(), error) {
	if ic.Acquire == nil || img == nil {
		return img, func() {}, nil
	}
	return ic.Acquire(ctx, img)
}

// caseLayer is the image state of one case.
type caseLayer struct {
	layer   *image.Layer
	task    *harbor.Task
	workdir string
	// release lets go of the image's hold once the layer is gone.
	release func()
	// caps says how the task's resource caps were applied to the agent.
	caps []limits.Applied
}

// imageWorkspace makes the case's layer and returns the session's cwd: the
// working directory inside the image.
func (w *worker) imageWorkspace(ctx context.Context, run *caseRun) (string, error) {
	ic := w.r.cfg.Image
	img, task, err := ic.For(run.unit.Case)
	if err != nil {
		return "", &setupError{msg: err.Error()}
	}
	// The image is unpacked (once) as its trial is about to start, and
	// held until the trial's layer is gone.
	img, release, err := ic.acquire(ctx, img)
	if err != nil {
		return "", &setupError{msg: err.Error()}
	}
	l, err := image.NewLayer(img, ic.LayerDir)
	if err != nil {
		release()
		return "", &setupError{msg: err.Error()}
	}
	l.Self = ic.Self
	// A layer that fails before its trial lets go of its image too.
	fail := func(err error) (string, error) {
		l.Remove()
		release()
		return "", err
	}
	workdir := img.Workdir()
	if task != nil {
		workdir = task.Workdir(img)
		if task.MultiStep() {
			// A step's setup copies its workdir/ into the working
			// directory while the agent runs: the directory is in the
			// layer from the start, so the agent's view of it never
			// goes stale (each command mounts the overlay on its own).
			if err := l.MkdirAll(workdir); err != nil {
				return fail(&setupError{msg: fmt.Sprintf("task %s: working directory %s: %v", task.Name, workdir, err)})
			}
		}
		if err := w.checkHealth(l, task); err != nil {
			return fail(err)
		}
		if err := harbor.InstallSkills(w.ctx(), l, task, ic.SkillsHome, harbor.Step{}); err != nil {
			return fail(&setupError{msg: fmt.Sprintf("task %s: %v", task.Name, err), exitCode: -1})
		}
	}
	run.layer = &caseLayer{layer: l, task: task, workdir: workdir, release: release}
	run.record.Cwd = workdir
	return workdir, nil
}

// checkHealth runs a task's [environment.healthcheck] in its fresh layer,
// before the agent starts; one that never passes is the environment's
// failure (workspace_setup), with its last output on the record.
func (w *worker) checkHealth(l *image.Layer, task *harbor.Task) error {
	hc := task.Config.Healthcheck
	if hc == nil {
		return nil
	}
	_, err := harbor.CheckHealth(w.ctx(), l, task, hc, harbor.Step{})
	if err == nil {
		return nil
	}
	se := &setupError{msg: fmt.Sprintf("task %s: %v", task.Name, err), exitCode: -1, evidence: "the task's healthcheck never passed"}
	var he *harbor.HealthError
	if errors.As(err, &he) {
		se.output = he.Last.Output
		if !he.Last.TimedOut {
			se.exitCode = he.Last.ExitCode
		}
	}
	return se
}

// ctx is what stops the commands run in a case's layer before its agent
// (a healthcheck, the copy of its skills): a second interrupt.
func (w *worker) ctx() context.Context {
	if w.r.grading != nil {
		return w.r.grading
	}
	return context.Background()
}

// startAgentFor starts the agent of a case: in its layer when the run has
// an image, else as startAgent does.
func (w *worker) startAgentFor(ctx context.Context, run *caseRun, dir string) (*agent, *schemas.ErrorInfo) {
	if run.layer == nil {
		return w.r.startAgent(ctx, dir)
	}
	lr := &layerRunner{cl: run.layer, cfg: w.r.cfg.Image}
	return w.r.startAgentWith(ctx, run.layer.layer.Dir, lr)
}

// layerRunner is the sandbox.Runner of a case's agent: it runs commands in
// the case's layer.
type layerRunner struct {
	cl  *caseLayer
	cfg *ImageConfig
}

// ResolvesInside says the agent's program is looked up in the image, not
// on the host, when it is already in the image.
func (lr *layerRunner) ResolvesInside() bool { return lr.cfg.AgentInImage }

// Info says how the agent ran.
func (lr *layerRunner) Info() sandbox.Info {
	info := sandbox.Info{Backend: "image", Network: lr.network(), Caps: lr.cl.caps}
	if info.Network == "allow" {
		for _, r := range lr.egress().Rules() {
			info.Allow = append(info.Allow, r.String())
		}
	}
	return info
}

// network is the agent's network: "host", "allow" (the egress allowlist)
// or "none" (loopback only).
func (lr *layerRunner) network() string {
	c, t := lr.cfg, lr.cl.task
	if c.NoNetwork {
		return "none"
	}
	n := c.Network
	internet := true
	if t != nil {
		internet, _ = t.Config.AgentNetwork()
	}
	switch {
	case t != nil && !internet:
		n = "allow"
		if c.TaskNetwork == "none" {
			n = "none"
		}
	case t != nil:
		n = c.TaskNetwork
	}
	switch {
	case n == "":
		return "host"
	case n == "allow" && c.Egress == nil:
		return "none"
	}
	return n
}

// egress is the proxy of an agent on network "allow": the run's, with the
// hosts of a task's network_mode = "allowlist" (the agent's own, else the
// environment's) added to its allowlist.
func (lr *layerRunner) egress() *egress.Proxy {
	if t := lr.cl.task; t != nil {
		if _, hosts := t.Config.AgentNetwork(); len(hosts) > 0 {
			return lr.cfg.Egress.With(hosts)
		}
	}
	return lr.cfg.Egress
}

// caps are the caps of the agent: a task's own, else the run's.
func (lr *layerRunner) caps() (limits.Caps, string, bool) {
	pids, pidsName := limits.DefaultCaps().Pids, ""
	if lr.cfg.Caps != nil {
		pids, pidsName = lr.cfg.Caps.Pids, lr.cfg.Caps.Names.Pids
	}
	if t := lr.cl.task; t != nil {
		tc := t.Config
		// A task's own caps are named by its task.toml keys.
		names := limits.Names{Memory: "task.toml environment.memory", CPUs: "task.toml environment.cpus", Disk: "task.toml environment.storage", Pids: pidsName}
		return limits.Caps{MemoryBytes: tc.MemoryMB << 20, CPUs: tc.CPUs, DiskBytes: tc.StorageMB << 20, Pids: pids, Names: names}, "task " + t.Name, true
	}
	if lr.cfg.Caps == nil {
		return limits.Caps{}, "", false
	}
	return *lr.cfg.Caps, "image " + lr.cl.layer.Image.Ref, true
}

// Wrap returns the command line that runs c in the layer.
func (lr *layerRunner) Wrap(c sandbox.Command) (sandbox.Wrapped, error) {
	img := lr.cl.layer.Image
	argv, binds := c.Argv, []image.Bind(nil)
	if !lr.cfg.AgentInImage {
		var err error
		if argv, binds, err = image.HostAgent(c.Argv, c.Env, img); err != nil {
			return sandbox.Wrapped{}, err
		}
	}
	// The image's environment, then the task's (its compose file's,
	// [environment] env, [agent] env), then the agent's own variables.
	env := img.Env()
	if lr.cl.task != nil {
		env = harbor.SetEnv(env, lr.cl.task.AgentEnv())
	}
	own := map[string]string{}
	for _, kv := range agentVars(c.Env) {
		k, v, _ := strings.Cut(kv, "=")
		own[k] = v
	}
	env = harbor.SetEnv(env, own)
	network := lr.network()
	var sess *egress.Session
	var log *connLog
	if network == "allow" {
		// The only way out: the allowlist proxy, through the bridge,
		// which listens on the image's loopback.
		log = &connLog{}
		var err error
		if sess, err = lr.egress().NewSession(log.add); err != nil {
			return sandbox.Wrapped{}, fmt.Errorf("image network: %w", err)
		}
		log.sess = sess
		binds = append(binds, harbor.EgressBinds(sess)...)
		env = append(env, sess.Env...)
	}
	user := ""
	if lr.cl.task != nil {
		user = lr.cl.task.Config.AgentUser.User
	}
	if sess != nil {
		var err error
		if argv, env, user, err = harbor.BridgeAs(img, user, sess, argv, env); err != nil {
			sess.Close()
			return sandbox.Wrapped{}, err
		}
	}
	line, err := lr.cl.layer.Argv(context.Background(), image.Run{Argv: argv, Dir: lr.cl.workdir, Env: env, User: user, Binds: binds, NoNetwork: network != "host"})
	if err != nil {
		if sess != nil {
			sess.Close()
		}
		return sandbox.Wrapped{}, err
	}
	w := sandbox.Wrapped{Argv: line, Dir: lr.cl.layer.Dir, Env: []string{}, Cleanup: func() {}}
	if sess != nil {
		w.Cleanup = func() { sess.Close() }
		w.Connections = log.take
	}
	caps, what, ok := lr.caps()
	if !ok {
		return w, nil
	}
	// The caps (a task's cpus, memory and storage, else the run's
	// --sandbox caps) cover the agent and all it starts: cgroups where the
	// host delegates them, else rlimits and watchers (package limits); the
	// disk cap covers the layer.
	g, _, err := limits.New(caps, limits.Options{DiskDirs: []string{lr.cl.layer.Upper()}, CgroupParent: lr.cfg.CgroupParent})
	if err != nil {
		w.Cleanup()
		return sandbox.Wrapped{}, fmt.Errorf("%s caps: %w", what, err)
	}
	lr.cl.caps = g.Applied()
	w.Argv = append(g.WrapperArgs(), line...)
	inner := w.Cleanup
	w.Cleanup = func() { g.Close(); inner() }
	w.Started = func(pid int) { g.Start(pid, func() { syscall.Kill(-pid, syscall.SIGKILL) }) }
	w.LimitHit = g.Check
	return w, nil
}

// connLog keeps the connections of an agent's egress session until they
// are taken for its record.
type connLog struct {
	mu    sync.Mutex
	sess  *egress.Session
	ended []egress.Connection
	shown map[uint64]bool
}

func (l *connLog) add(c egress.Connection) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.ID != 0 && l.shown[c.ID] {
		return
	}
	l.ended = append(l.ended, c)
}

// take returns the connections that ended since the last take, and those
// still open (once each).
func (l *connLog) take() []egress.Connection {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.ended
	l.ended = nil
	if l.shown == nil {
		l.shown = map[uint64]bool{}
	}
	if l.sess != nil {
		for _, c := range l.sess.Open() {
			if !l.shown[c.ID] {
				l.shown[c.ID] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// agentVars are the variables of the agent's environment that go into the
// image: locale, terminal, time zone, harness's own, and those of model
// providers and agents (keys, endpoints, settings); the host's PATH, HOME
// and the like stay out (the image has its own).
func agentVars(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "LANG" || k == "LANGUAGE" || k == "TERM" || k == "TZ" || strings.HasPrefix(k, "LC_") || strings.HasPrefix(k, "HARNESS_"):
		case strings.Contains(k, "API_KEY") || strings.HasSuffix(k, "_BASE_URL") || strings.HasSuffix(k, "_TOKEN"):
		default:
			ok := false
			for _, p := range []string{"ANTHROPIC_", "CLAUDE_", "OPENAI_", "CODEX_", "GEMINI_", "GOOGLE_", "VERTEX_", "OPENROUTER_", "MISTRAL_", "DEEPSEEK_", "GROQ_", "XAI_", "AZURE_OPENAI_", "OLLAMA_", "DISABLE_", "NODE_OPTIONS"} {
				if strings.HasPrefix(k, p) {
					ok = true
				}
			}
			if !ok {
				continue
			}
		}
		out = append(out, kv)
	}
	return out
}

// finishLayer puts the layer's changes, taken when the agent's turn ended,
// and a Harbor task's verdict on the record.
func (w *worker) finishLayer(run *caseRun, rec *schemas.CaptureRecord) {
	cl := run.layer
	img := cl.layer.Image
	if run.taskSteps != nil {
		rec.TaskSteps = run.taskSteps.steps
	}
	rec.Artifacts = run.artifacts
	if run.verdict != nil {
		rec.Score = run.verdict
		if rec.Score.Error == nil && len(rec.Score.Outcome) > 0 {
			rec.Outcome = rec.Score.Outcome
		}
	}
	info := (&layerRunner{cl: cl, cfg: w.r.cfg.Image}).Info()
	rec.Provenance.Sandbox = &schemas.SandboxInfo{Backend: info.Backend, Network: info.Network, Allow: info.Allow}
	for _, a := range info.Caps {
		rec.Provenance.Sandbox.Caps = append(rec.Provenance.Sandbox.Caps, schemas.SandboxCap{Cap: a.Cap, Value: a.Value, How: a.How})
	}
	ws := &schemas.Workspace{Path: cl.layer.Dir, Template: img.Ref, Kept: w.r.cfg.Image.Keep, Image: &schemas.ImageInfo{Ref: img.Ref, Digest: img.Digest, Source: img.Source}}
	if cl.task != nil {
		// Harbor's choice: the task's prebuilt image (docker_image), or
		// its environment built.
		ws.ImageSource = schemas.ImagePrebuilt
		if img.Kind == "build" {
			ws.ImageSource = schemas.ImageBuilt
		}
	}
	if run.changeErr != nil {
		rec.Errors = append(rec.Errors, "image layer changes: "+run.changeErr.Error())
	}
	ws.FileChanges, ws.GitChanges, ws.OutsideChanges = run.changes, run.gitChanges, run.outside
	if ws.FileChanges == nil {
		ws.FileChanges = []schemas.FileChange{}
	}
	rec.Workspace = ws
}

// verify runs a Harbor task's verifier in the layer its agent left, on
// the verifier's network (see verifierStep). A second interrupt stops it.
func (w *worker) verify(cl *caseLayer, onConn func(egress.Connection)) *schemas.GraderResult {
	var step harbor.Step
	if s := w.r.cfg.Image.TimeoutScale; s > 0 && s != 1 {
		step.Timeout = time.Duration(float64(cl.task.Config.VerifierTimeout) * s)
	}
	step = verifierStep(w.r.cfg.Image, cl.task, step, onConn)
	ctx := w.r.grading
	if ctx == nil {
		ctx = context.Background()
	}
	w.r.judging.Add(1)
	defer w.r.judging.Add(-1)
	res := harbor.Verify(ctx, cl.layer, cl.task, step)
	return &res
}

// verifierStep gives a task's verifier its network: the host's when its
// task gives it the internet, else its allowlist's hosts (not the
// agent's model endpoints) through a proxy set up as the run's, each
// connection told to onConn, or loopback only.
func verifierStep(ic *ImageConfig, t *harbor.Task, s harbor.Step, onConn func(egress.Connection)) harbor.Step {
	return t.PhaseStep(s, harbor.PhaseVerifier, ic.Egress, onConn)
}

// isVerifierPath says whether p is where the verifier's files go.
func isVerifierPath(p string) bool {
	return p == harbor.TestsPath || strings.HasPrefix(p, harbor.TestsPath+"/") || p == "/logs" || strings.HasPrefix(p, "/logs/")
}

// removeLayer removes a case's layer unless it is to be kept (keep, or
// --keep-layers); a kept one is left removable without privileges.
// The image's hold goes with it: a kept layer does not keep its image
// unpacked.
func (r *Runner) removeLayer(run *caseRun, keep bool) {
	switch {
	case run.layer == nil:
		return
	case keep || r.cfg.Image.Keep:
		_ = run.layer.layer.Release()
	default:
		run.layer.layer.Remove()
	}
	if run.layer.release != nil {
		run.layer.release()
	}
}
