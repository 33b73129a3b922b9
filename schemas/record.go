package schemas

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
)

// Error classes put on a record's Error, one per failure kind.
const (
	ErrAgentStart     = "agent_start"     // the agent could not be started or initialized
	ErrWorkspaceSetup = "workspace_setup" // the workspace copy or its setup command failed
	ErrAgentCrash     = "agent_crash"     // the agent process died during the case
	ErrTimeout        = "timeout"         // a turn exceeded its timeout
	ErrProtocol       = "protocol"        // the agent broke the protocol (bad version, bad answer)
	ErrAuthRequired   = "auth_required"   // the agent answered -32000 authentication required
	ErrAgentError     = "agent_error"     // the agent answered a request with a JSON-RPC error
	ErrGraderError    = "grader_error"    // the grader crashed or failed
	ErrGraderTimeout  = "grader_timeout"  // the grader exceeded its timeout
	ErrGraderInvalid  = "grader_invalid"  // the grader's output was not a valid result
	ErrInterrupted    = "interrupted"     // the run was interrupted by a signal
	ErrResourceLimit  = "resource_limit"  // the agent hit a resource cap of its sandbox (memory, pids, disk)
	ErrReplayMiss     = "replay_miss"     // a model call had no recorded answer to replay (infrastructure)
	ErrUserError      = "user_error"      // a case's simulated user failed or wrote no valid reply
	ErrProviderError  = "provider_error"  // the trial ended on model calls the provider failed, as the model gateway saw them
	// ErrUnclassified is the class counted for an error that has none.
	ErrUnclassified = "unclassified"
)

// Owners of a failed trial (ErrorInfo.Owner): whose failure it is, as the
// harness decided from what it saw.
const (
	// OwnerAgent: a wrong answer, a turn past its time limit, a cap
	// exceeded, a crash or a protocol break of the agent's own. Counted in
	// n as a failure.
	OwnerAgent = "agent"
	// OwnerInfra: the harness, sandbox or image failed, the machine ran
	// out of something no cap set, the model provider answered
	// 429/5xx/overloaded or the connection to it failed. Retried, then
	// left out of n.
	OwnerInfra = "infra"
	// OwnerGrader: the grader or verifier failed to judge. Graded again,
	// then left out of n.
	OwnerGrader = "grader"
	// OwnerConfig: the agent cannot start (a missing binary, no key,
	// authentication required). Left out of n; a run stops after the
	// first few.
	OwnerConfig = "config"
)

// Owners lists the owners, in the order counts show them.
var Owners = []string{OwnerAgent, OwnerInfra, OwnerGrader, OwnerConfig}

// Stages of a unit where a failure happened (ErrorInfo.Stage).
const (
	StageSetup      = "setup"       // the workspace, image or sandbox was made
	StageAgentStart = "agent_start" // the agent started, initialized and opened its session
	StageTurn       = "turn"        // the agent's turns ran
	StageGrading    = "grading"     // the graders or the verifier judged
)

// CaptureRecord is one line of capture output: what the agent did for one
// prompt case in one trial.
type CaptureRecord struct {
	ID          string          `json:"id"`
	Trial       int             `json:"trial"`
	Input       Turns           `json:"input"`
	Output      string          `json:"output"`
	Expected    string          `json:"expected,omitempty"`
	Hint        string          `json:"hint,omitempty"`
	Reference   string          `json:"reference,omitempty"`
	Trajectory  []Step          `json:"trajectory"`
	Plan        json.RawMessage `json:"plan,omitempty"`
	StopReason  string          `json:"stopReason,omitempty"`
	StopReasons []string        `json:"stopReasons,omitempty"`
	Metadata    map[string]any  `json:"metadata"`
	Timing      Timing          `json:"timing"`
	ToolErrors  bool            `json:"toolErrors"`
	Usage       *Usage          `json:"usage,omitempty"`
	Errors      []string        `json:"errors,omitempty"`
	Error       *ErrorInfo      `json:"error,omitempty"`
	Score       *GraderResult   `json:"score,omitempty"`
	Scores      []GraderResult  `json:"scores,omitempty"`
	Workspace   *Workspace      `json:"workspace,omitempty"`
	// Network counts the connections the agent made out of its sandbox
	// (each is a network step).
	Network           *NetworkCounts `json:"network,omitempty"`
	Provenance        Provenance     `json:"provenance"`
	Cwd               string         `json:"cwd,omitempty"`
	TurnCount         int            `json:"turnCount,omitempty"`
	NegativeReference string         `json:"negativeReference,omitempty"`
	// Truncated says the record was over its size limit and which values
	// were cut (each ends with a marker saying how much).
	Truncated *Truncation `json:"truncated,omitempty"`
	// Outcome is the grader's outcome data, lifted to the top level as
	// the TypeScript acp-harness does.
	Outcome map[string]any `json:"outcome,omitempty"`
	// Session is the ACP session the case ran in, as acp-harness's
	// Session names it, so the record can be matched with the agent's
	// own logs.
	Session *Session `json:"session,omitempty"`
	// Cost is what the record spent: agent and judge tokens, and USD
	// when priced. The spend of failed attempts is not in it: each
	// attempt carries its own.
	Cost *Cost `json:"cost,omitempty"`
	// Attempts are the unit's earlier attempts that failed for reasons
	// not the agent's (an infrastructure failure, retried), oldest first;
	// the record itself is the last attempt. They never count as trials.
	Attempts []Attempt `json:"attempts,omitempty"`
	// CaseHash is the content hash of the case the record ran
	// (PromptCase.ContentHash); empty in records of older runs.
	CaseHash string `json:"caseHash,omitempty"`
	// TaskSteps are the steps of a multi-step task the trial reached, in
	// order; Score is then their combined verdict.
	TaskSteps []TaskStep `json:"taskSteps,omitempty"`
	// SimulatedUser is how the conversation with a case's simulated user
	// went; Input then holds every user turn sent.
	SimulatedUser *SimUserOutcome `json:"simulatedUser,omitempty"`
	// Artifacts are what a Harbor task's artifacts copied out of the
	// trial's environment, and where.
	Artifacts *Artifacts `json:"artifacts,omitempty"`
	// ModelCalls is the ledger of the agent's model calls, as the run's
	// model gateway saw them; with it, Usage holds the ledger's sums and
	// AgentUsage what the agent reported itself.
	ModelCalls []ModelCall `json:"modelCalls,omitempty"`
	// AgentUsage is the usage the agent reported, kept beside Usage when
	// Usage holds the ledger's sums.
	AgentUsage *Usage `json:"agentUsage,omitempty"`
	// ProviderFailure says the trial ended on failed model calls the
	// agent could not get past: the provider's fault, not the agent's.
	ProviderFailure *ProviderFailure `json:"providerFailure,omitempty"`
}

// Attempt is one failed attempt at a unit, kept on the record of the
// attempt that followed it.
type Attempt struct {
	// Attempt numbers the attempt, from 1.
	Attempt int `json:"attempt"`
	// Error is why it failed (with its owner and evidence).
	Error *ErrorInfo `json:"error"`
	// Timing is its wall clock.
	Timing Timing `json:"timing"`
	// Steps counts its trajectory's steps; Output is what the agent said.
	Steps  int    `json:"steps"`
	Output string `json:"output,omitempty"`
	// Usage is what the agent reported using; Cost what it spent.
	Usage *Usage `json:"usage,omitempty"`
	Cost  *Cost  `json:"cost,omitempty"`
	// SimulatedUser is the attempt's conversation with the case's
	// simulated user (a model user's calls are in its cost).
	SimulatedUser *SimUserOutcome `json:"simulatedUser,omitempty"`
	// Wait is how long the run waited before the next attempt, in
	// milliseconds.
	Wait int64 `json:"wait,omitempty"`
}

// OwnerOf says whose failure the record is ("" when it has no error, or
// none with an owner: a pass, a wrong answer without an error, an
// interrupted trial, a record of an older run). A grader's failure is the
// grader's.
func (r *CaptureRecord) OwnerOf() string {
	if r.Error != nil {
		return r.Error.Owner
	}
	if r.Score != nil && r.Score.Error != nil {
		if r.Score.Error.Owner != "" {
			return r.Score.Error.Owner
		}
	}
	return ""
}

// AsAttempts returns the record's earlier attempts followed by the record
// itself as one more failed attempt, wait after it: what a unit run again
// carries.
func (r *CaptureRecord) AsAttempts(wait int64) []Attempt {
	out := append([]Attempt(nil), r.Attempts...)
	return append(out, Attempt{Attempt: len(r.Attempts) + 1, Error: r.Error, Timing: r.Timing, Steps: len(r.Trajectory),
		Output: r.Output, Usage: r.Usage, Cost: r.Cost, SimulatedUser: r.SimulatedUser, Wait: wait})
}

// AttemptsCost sums the cost of the record's failed attempts (nil when
// none has one).
func (r *CaptureRecord) AttemptsCost() *Cost {
	var c *Cost
	for i := range r.Attempts {
		c = c.Add(r.Attempts[i].Cost)
	}
	return c
}

// Session is an ACP session: its id and the _meta the agent returned
// with it.
type Session struct {
	ID   string          `json:"id"`
	Meta json.RawMessage `json:"_meta,omitempty"`
}

// Truncation notes the values cut from a record that was over its size
// limit.
type Truncation struct {
	// Limit is the size limit in bytes; Size the record's size before
	// the cut; Cut how many bytes were taken out.
	Limit  int64    `json:"limit"`
	Size   int64    `json:"size"`
	Cut    int64    `json:"cut"`
	Fields []string `json:"fields"`
}

// Timing holds the wall-clock facts of a record. Start, End and Written
// are epoch milliseconds; the others are durations in milliseconds. End is
// when the agent answered the case's last turn; Written when the run
// wrote the record, grading done (0 in records of older runs). Total is
// the agent's part of the trial (Start to End); Trial the whole trial, as
// -j counts it: the agent's part, then a task's verification and the
// graders that run in the trial's slot (0 in records of older runs).
type Timing struct {
	Start           int64  `json:"start"`
	End             int64  `json:"end"`
	Written         int64  `json:"written,omitempty"`
	FirstResponse   *int64 `json:"firstResponse,omitempty"`
	SessionCreation int64  `json:"sessionCreation"`
	Total           int64  `json:"total"`
	Trial           int64  `json:"trial,omitempty"`
	// Waited is the part of the trial (ms) the agent spent on the model
	// provider's failures: failed calls (rate limit, overload, server or
	// connection errors) and the agent's wait after each until its next
	// call (see ledger.Waited). Absent when none failed.
	Waited int64 `json:"waited,omitempty"`
}

// Usage is the token and context usage the agent reported: the latest
// usage_update (Used, Size, Cost) and the per-turn token counts of prompt
// responses, summed over turns.
type Usage struct {
	Used              *int64          `json:"used,omitempty"`
	Size              *int64          `json:"size,omitempty"`
	Cost              json.RawMessage `json:"cost,omitempty"`
	InputTokens       *int64          `json:"inputTokens,omitempty"`
	OutputTokens      *int64          `json:"outputTokens,omitempty"`
	TotalTokens       *int64          `json:"totalTokens,omitempty"`
	ThoughtTokens     *int64          `json:"thoughtTokens,omitempty"`
	CachedReadTokens  *int64          `json:"cachedReadTokens,omitempty"`
	CachedWriteTokens *int64          `json:"cachedWriteTokens,omitempty"`
}

// ErrorInfo classifies why a record or a grader result is incomplete.
type ErrorInfo struct {
	// Class is one of the Err* constants.
	Class string `json:"class"`
	// Message says what happened, for people.
	Message string `json:"message"`
	// Code is the JSON-RPC error code, when the agent sent one.
	Code *int64 `json:"code,omitempty"`
	// Data is the JSON-RPC error data, when the agent sent some.
	Data json.RawMessage `json:"data,omitempty"`
	// ExitCode is the exit status of the failed process, when there is one.
	ExitCode *int `json:"exitCode,omitempty"`
	// Signal names the signal that ended the failed process.
	Signal string `json:"signal,omitempty"`
	// Stderr is the tail of the failed process's standard error.
	Stderr string `json:"stderr,omitempty"`
	// Owner says whose failure it is (OwnerAgent, OwnerInfra, OwnerGrader
	// or OwnerConfig); absent on records of older runs and on interrupted
	// ones, which count as they always did (left out of n).
	Owner string `json:"owner,omitempty"`
	// Stage is where the unit failed (StageSetup, StageAgentStart,
	// StageTurn or StageGrading).
	Stage string `json:"stage,omitempty"`
	// Limit names the limit that ended an agent's trial: "timeout" (its
	// turn's time limit) or the sandbox's cap ("memory", "pids", "disk",
	// ...). Such a trial is graded as it stands.
	Limit string `json:"limit,omitempty"`
	// Evidence says in a few words what decided the owner: "provider
	// answered 503", "exit status 3", "killed by SIGKILL with no cap set".
	Evidence string `json:"evidence,omitempty"`
	// Pending, on an interrupted record, says what of the unit is left:
	// PendingGrading when its agent's turn is complete and only its
	// grading was cut short, which --resume does without running the
	// agent again.
	Pending string `json:"pending,omitempty"`
}

// PendingGrading is the Pending of an interrupted record whose agent's
// turn is complete: only its grading is left.
const PendingGrading = "grading"

// Ungraded says whether the record is one whose agent's turn is complete
// and whose grading a stop cut short: --resume grades it in the workspace
// the run kept, without running the agent again.
func (r *CaptureRecord) Ungraded() bool {
	return r.Error != nil && r.Error.Class == ErrInterrupted && r.Error.Pending == PendingGrading
}

// DiedOfStop says whether the error is a process's death by a signal that
// stops whole runs (SIGTERM, SIGINT, SIGHUP), or a shell's exit status
// 128+N for one of them, and names it. SIGKILL (the OOM killer, a timeout)
// is never one.
func (e *ErrorInfo) DiedOfStop() (string, bool) {
	if e == nil {
		return "", false
	}
	switch e.Signal {
	case "terminated", "interrupt", "hangup":
		// What scancel, systemctl stop, docker stop and a closed
		// terminal send to every process of a run.
		return e.Signal, true
	}
	if e.Signal == "" && e.ExitCode != nil {
		switch *e.ExitCode {
		case 129, 130, 143:
			return "exit status " + strconv.Itoa(*e.ExitCode), true
		}
	}
	return "", false
}

// Workspace describes the per-case copy of the workspace template.
type Workspace struct {
	// Path is where the copy was made (removed after the case unless kept).
	Path string `json:"path"`
	// Template is the directory that was copied.
	Template string `json:"template,omitempty"`
	// Kept says the copy was left on disk.
	Kept bool `json:"kept,omitempty"`
	// FileChanges lists what the agent added, modified or deleted in the
	// work tree.
	FileChanges []FileChange `json:"fileChanges"`
	// GitChanges lists what changed inside a repository's .git (config,
	// hooks, refs, HEAD; not objects, logs or the index): text files with
	// their diffs, binary files without their content.
	GitChanges []FileChange `json:"gitChanges,omitempty"`
	// Image names the image the case ran in, when it ran in one;
	// FileChanges then covers its working directory.
	Image *ImageInfo `json:"image,omitempty"`
	// ImageSource says, for a Harbor task, where its image came from:
	// ImagePrebuilt or ImageBuilt.
	ImageSource string `json:"imageSource,omitempty"`
	// OutsideChanges lists what the case changed in the image outside its
	// working directory (with an image).
	OutsideChanges []PathChange `json:"outsideChanges,omitempty"`
}

// ImageInfo names the image a case ran in.
type ImageInfo struct {
	// Ref is the reference as the run named it.
	Ref string `json:"ref"`
	// Digest identifies its content: the registry's manifest digest of
	// a pulled image, else the image ID or content hash ("" for a root
	// filesystem directory used in place).
	Digest string `json:"digest,omitempty"`
	// Source says where it came from: pulled, built or local.
	Source string `json:"source,omitempty"`
}

// UnmarshalJSON reads the object, and the "REF@ID" string records
// written before the image was an object.
func (i *ImageInfo) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		ref, id, _ := strings.Cut(s, "@")
		*i = ImageInfo{Ref: ref, Digest: id}
		return nil
	}
	type plain ImageInfo
	return json.Unmarshal(b, (*plain)(i))
}

// Where a Harbor task's image came from (Workspace.ImageSource).
const (
	// ImagePrebuilt is the image task.toml's docker_image names.
	ImagePrebuilt = "prebuilt"
	// ImageBuilt is the task's environment/ Dockerfile, built: the task
	// has no docker_image, --force-build was given, or its image was not
	// to be had.
	ImageBuilt = "built"
)

// PathChange is one path of an image a case added, modified or deleted.
type PathChange struct {
	Path   string `json:"path"`
	Status string `json:"status"` // added, modified, deleted
}

// FileChange is one file the case changed in its workspace.
type FileChange struct {
	Path   string `json:"path"`
	Status string `json:"status"` // added, modified, deleted, renamed
	// From is the old path of a renamed file.
	From string `json:"from,omitempty"`
	// Diff is a unified diff for text files (capped in size).
	Diff string `json:"diff,omitempty"`
	// Binary marks a file whose content is not text.
	Binary bool `json:"binary,omitempty"`
	// Content is the new content of a binary file (base64, up to 1 MiB),
	// so the workspace can be rebuilt exactly from the template.
	Content string `json:"content,omitempty"`
	// Size is the new size in bytes (0 for deleted files).
	Size int64 `json:"size"`
}

// Provenance says what produced a record.
type Provenance struct {
	Harness         string   `json:"harness"`
	HarnessRevision string   `json:"harnessRevision,omitempty"`
	HarnessDirty    bool     `json:"harnessDirty,omitempty"`
	AgentName       string   `json:"agentName,omitempty"`
	AgentTitle      string   `json:"agentTitle,omitempty"`
	AgentVersion    string   `json:"agentVersion,omitempty"`
	ProtocolVersion int      `json:"protocolVersion,omitempty"`
	Command         []string `json:"command,omitempty"`
	Graders         []string `json:"graders,omitempty"`
	// GraderFiles are the files the graders run or read, with their
	// sha256 when the run started (every grading call checks them).
	GraderFiles []GraderFile `json:"graderFiles,omitempty"`
	// Sandbox says how the agent ran: backend "none" or "bwrap".
	Sandbox *SandboxInfo `json:"sandbox,omitempty"`
}

// GraderFile is a file a grader runs or reads, fingerprinted when the run
// started.
type GraderFile struct {
	// Grader is the grader's name, as in Provenance.Graders.
	Grader string `json:"grader"`
	// Path is the file (or directory tree), relative to the working
	// directory when it lies under it.
	Path string `json:"path"`
	// SHA256 is the hex sha256 of its content (of a tree: of its files'
	// paths and hashes).
	SHA256 string `json:"sha256"`
}

// SandboxInfo describes the sandbox an agent ran in.
type SandboxInfo struct {
	Backend string `json:"backend"`
	Network string `json:"network,omitempty"`
	Version string `json:"version,omitempty"`
	// Allow is the egress allowlist of network "allow".
	Allow []string `json:"allow,omitempty"`
	// Hidden are the host paths the agent saw empty (home directories,
	// sockets, credential stores).
	Hidden []string `json:"hidden,omitempty"`
	// Bound are hidden paths bound back read-only (the agent's install
	// directory, --sandbox-ro).
	Bound []string `json:"bound,omitempty"`
	// Protected are the run's files kept read-only inside writable
	// directories (outputs, graders, prompts).
	Protected []string `json:"protected,omitempty"`
	// Caps say how each resource cap was enforced.
	Caps []SandboxCap `json:"caps,omitempty"`
}

// NetworkCounts sums a case's connections out of the sandbox.
type NetworkCounts struct {
	Allowed  int   `json:"allowed"`
	Denied   int   `json:"denied"`
	BytesOut int64 `json:"bytesOut"`
	BytesIn  int64 `json:"bytesIn"`
}

// SandboxCap says how one resource cap of a sandbox was enforced.
type SandboxCap struct {
	// Cap is memory, pids, cpus or disk.
	Cap string `json:"cap"`
	// Value is the cap as written ("512 MiB", "1024", "1.5").
	Value string `json:"value"`
	// How is "cgroup v2", "cgroup v1", "rlimit", "watcher", "not
	// applied" or "no cap".
	How string `json:"how"`
	// Note says more when the enforcement is partial.
	Note string `json:"note,omitempty"`
}

// GraderResult is what a grader said about a record.
type GraderResult struct {
	Pass       bool            `json:"pass"`
	Score      float64         `json:"score"`
	Reasoning  string          `json:"reasoning,omitempty"`
	Checks     []Check         `json:"checks,omitempty"`
	Outcome    map[string]any  `json:"outcome,omitempty"`
	Grader     string          `json:"grader,omitempty"`
	DurationMs int64           `json:"durationMs,omitempty"`
	Usage      json.RawMessage `json:"usage,omitempty"`
	Error      *ErrorInfo      `json:"error,omitempty"`
	// Notes say what the grader's reply held that harness did not read
	// (a misspelt key), for the caller to tell the grader's author; they
	// are not written.
	Notes []string `json:"-"`
}

// Check is one aspect of a grader result.
type Check struct {
	Text     string   `json:"text"`
	Pass     bool     `json:"pass"`
	Score    *float64 `json:"score,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	Evidence any      `json:"evidence,omitempty"`
}

// UnmarshalJSON accepts "reason" as a synonym of "reasoning" (the agentv
// protocol uses reason).
func (g *GraderResult) UnmarshalJSON(b []byte) error {
	type plain GraderResult
	var v struct {
		plain
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*g = GraderResult(v.plain)
	if g.Reasoning == "" {
		g.Reasoning = v.Reason
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
