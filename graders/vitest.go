package graders

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// IsVerifier reports whether a grader file is a Vitest verifier (agentv's
// convention): *.test.ts, *.spec.ts (and .js, .mts, .mjs), or EVAL.ts.
func IsVerifier(path string) bool {
	base := filepath.Base(path)
	if base == "EVAL.ts" || base == "EVAL.js" {
		return true
	}
	for _, suffix := range []string{".test.ts", ".spec.ts", ".test.js", ".spec.js", ".test.mts", ".spec.mts", ".test.mjs", ".spec.mjs"} {
		if strings.HasSuffix(base, suffix) {
			return true
		}
	}
	return false
}

// verifierDir is where verifier files are put inside a workspace copy.
const verifierDir = ".harness-verifiers"

// newVitestVerifier makes a grader that copies the verifier file into the
// record's workspace after the agent finished, runs it there with Vitest's
// JSON reporter (AGENTV_WORKSPACE_PATH set), and makes each test a check.
func newVitestVerifier(name, file string, opts Options) *testsGrader {
	return &testsGrader{
		name:      name,
		format:    "vitest-json",
		path:      verifierDir + "/report.json",
		verifier:  file,
		timeout:   opts.timeout(DefaultTimeout),
		threshold: opts.threshold(),
		opts:      opts,
	}
}

// vitestCommand is how Vitest runs in workspace ws: the workspace's own
// Vitest, else one on PATH, else npx fetches it.
func vitestCommand(ws, rel string) []string {
	args := []string{"run", rel, "--root", ws, "--reporter=json", "--outputFile=" + filepath.Join(ws, verifierDir, "report.json")}
	if p := filepath.Join(ws, "node_modules", ".bin", "vitest"); isExecutable(p) {
		return append([]string{p}, args...)
	}
	if p, err := exec.LookPath("vitest"); err == nil {
		return append([]string{p}, args...)
	}
	return append([]string{"npx", "--yes", "vitest@3"}, args...)
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// agentvVerifier recognizes agentv's Vitest adapter command ([agentv,
// eval, FILE] or [agentv, eval, vitest, ..., FILE]) and returns the
// verifier file, so that such a suite runs without agentv installed.
func agentvVerifier(argv []string) (string, bool) {
	if len(argv) < 3 || filepath.Base(argv[0]) != "agentv" || argv[1] != "eval" {
		return "", false
	}
	last := argv[len(argv)-1]
	if !IsVerifier(last) {
		return "", false
	}
	return last, true
}
