package graders

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"harness/internal/safefile"
	"harness/internal/treecopy"
	"harness/schemas"
)

// testsKeys are the keys of a tests grader.
var testsKeys = []string{"command", "report", "files", "scoring"}

// testsGrader runs a test suite in the record's workspace and makes each
// test a check. Failing tests are a failing verdict; only "no report" (the
// command could not run, crashed before writing one, wrote one that does
// not parse, or found no tests) is a grader error.
type testsGrader struct {
	name      string
	argv      []string
	format    string // go-test-json, junit, vitest-json, tap
	path      string // report file, relative to the workspace (junit, vitest-json)
	files     string // hidden verifier files copied in first
	verifier  string // a Vitest verifier file, run with the workspace's Vitest
	all       bool   // score 1 only when every test passed
	timeout   time.Duration
	threshold float64
	opts      Options
}

func buildTests(m map[string]any, c cfgCtx) (Grader, error) {
	argv, err := c.command(m)
	if err != nil {
		return nil, err
	}
	raw, _ := c.rawCommand(m)
	if err := c.opts.pins.addArgv(raw, c.dir); err != nil {
		return nil, c.errf("command", "%v", err)
	}
	g := &testsGrader{name: c.id("tests", m), argv: argv, timeout: c.opts.timeout(DefaultTimeout), threshold: c.opts.threshold(), opts: c.opts}
	report, err := c.str(m, "report")
	if err != nil {
		return nil, err
	}
	format, path, _ := strings.Cut(report, ":")
	switch format {
	case "go-test-json", "tap":
		if path != "" {
			return nil, c.errf("report", "%s is read from the command's stdout: give no path", format)
		}
	case "junit", "vitest-json":
		if path == "" {
			return nil, c.errf("report", "%s needs the report file's path in the workspace, as in %s:report.xml", format, format)
		}
		if filepath.IsAbs(path) || strings.HasPrefix(filepath.Clean(path), "..") {
			return nil, c.errf("report", "the report path %q must lie inside the workspace", path)
		}
	case "":
		return nil, c.errf("report", "missing (want go-test-json, tap, junit:PATH or vitest-json:PATH)")
	default:
		return nil, c.errf("report", "unknown report format %q (want go-test-json, tap, junit:PATH or vitest-json:PATH)", format)
	}
	g.format, g.path = format, path
	if files, err := c.str(m, "files"); err != nil {
		return nil, err
	} else if files != "" {
		g.files = c.resolve(files)
		if st, err := os.Stat(g.files); err != nil || !st.IsDir() {
			return nil, c.errf("files", "%s is not a directory", files)
		}
		if err := c.opts.pins.add(g.files); err != nil {
			return nil, c.errf("files", "%v", err)
		}
	}
	switch s, err := c.str(m, "scoring"); {
	case err != nil:
		return nil, err
	case s == "all":
		g.all = true
	case s == "" || s == "fraction":
	default:
		return nil, c.errf("scoring", "unknown scoring %q (want fraction or all)", s)
	}
	return g, nil
}

// Name implements Grader.
func (g *testsGrader) Name() string { return g.name }

// Grade implements Grader.
func (g *testsGrader) Grade(ctx context.Context, in *Input) schemas.GraderResult {
	start := time.Now()
	r := in.Record
	if r == nil || r.Workspace == nil || r.Workspace.Path == "" {
		return finish(failure(schemas.ErrGraderError, "the record has no workspace to run the tests in: it was captured without a workspace template"), g.name, start)
	}
	ws := r.Workspace.Path
	if st, err := os.Stat(ws); err != nil || !st.IsDir() {
		return finish(failure(schemas.ErrGraderError, "the workspace copy %s is gone", ws), g.name, start)
	}
	if g.files != "" {
		// Merged in, replacing files of the same name; links are left
		// out, and the files made readable and writable by their owner.
		opts := treecopy.Options{Merge: true, SkipSymlinks: true, FilePerm: 0o600}
		if err := treecopy.Copy(g.files, ws, opts); err != nil {
			return finish(failure(schemas.ErrGraderError, "copying the verifier files %s into the workspace: %v", g.files, err), g.name, start)
		}
	}
	argv := g.argv
	if g.verifier != "" {
		rel := filepath.Join(verifierDir, filepath.Base(g.verifier))
		b, err := os.ReadFile(g.verifier)
		if err == nil {
			os.MkdirAll(filepath.Join(ws, verifierDir), 0o755)
			err = os.WriteFile(filepath.Join(ws, rel), b, 0o644)
		}
		if err != nil {
			return finish(failure(schemas.ErrGraderError, "copying the verifier %s into the workspace: %v", g.verifier, err), g.name, start)
		}
		argv = vitestCommand(ws, rel)
	}
	if g.path != "" {
		os.Remove(filepath.Join(ws, g.path)) // never read a stale report
	}
	env := append(os.Environ(), "AGENTV_WORKSPACE_PATH="+ws)
	p := runProcess(ctx, argv, ws, env, nil, g.timeout, g.opts.Sandbox, in)
	if p.limit != "" {
		return finish(schemas.GraderResult{Error: procError(schemas.ErrGraderError, "the sandbox ended the tests: "+p.limit, p)}, g.name, start)
	}
	if p.timedOut {
		return finish(schemas.GraderResult{Error: procError(schemas.ErrGraderTimeout, fmt.Sprintf("the tests did not finish within %s", g.timeout), p)}, g.name, start)
	}
	if p.err != nil && p.exitCode < 0 {
		return finish(schemas.GraderResult{Error: procError(schemas.ErrGraderError, fmt.Sprintf("cannot run %q: %v", argv[0], p.err), p)}, g.name, start)
	}
	var report []byte
	if g.path == "" {
		report = p.stdout
	} else {
		b, err := safefile.Read(filepath.Join(ws, g.path), 256<<20)
		if err != nil {
			return finish(schemas.GraderResult{Error: procError(schemas.ErrGraderError,
				fmt.Sprintf("no report: %q exited %d and wrote no %s (%v)", strings.Join(argv, " "), p.exitCode, g.path, err), p)}, g.name, start)
		}
		report = b
	}
	var cases []testCase
	var err error
	switch g.format {
	case "go-test-json":
		cases, err = parseGoTestJSON(report)
	case "junit":
		cases, err = parseJUnit(report)
	case "vitest-json":
		cases, err = parseVitestJSON(report)
	case "tap":
		cases, err = parseTAP(report)
	}
	if err != nil {
		return finish(schemas.GraderResult{Error: procError(schemas.ErrGraderError, "no report: "+err.Error(), p)}, g.name, start)
	}
	var res schemas.GraderResult
	passed, ran, skipped := 0, 0, 0
	for _, tc := range cases {
		if tc.Skip {
			skipped++
			continue
		}
		ran++
		if tc.Pass {
			passed++
		}
		check := schemas.Check{Text: tc.Name, Pass: tc.Pass}
		if tc.Message != "" {
			check.Evidence = tc.Message
		}
		res.Checks = append(res.Checks, check)
	}
	if ran == 0 {
		return finish(schemas.GraderResult{Error: procError(schemas.ErrGraderError,
			fmt.Sprintf("no report: no tests ran (%d found, %d skipped)", len(cases), skipped), p)}, g.name, start)
	}
	res.Pass = passed == ran
	res.Score = float64(passed) / float64(ran)
	if g.all {
		res.Score = 0
		if res.Pass {
			res.Score = 1
		}
	}
	res.Reasoning = fmt.Sprintf("%d of %d tests passed", passed, ran)
	if skipped > 0 {
		res.Reasoning += fmt.Sprintf(" (%d skipped)", skipped)
	}
	return finish(res, g.name, start)
}
