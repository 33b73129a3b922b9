package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/rogpeppe/go-internal/testscript"

	"harness/cli"
	"harness/image"
	"harness/results"
	"harness/sandbox"
	"harness/testkit/fakeagent"
	"harness/testkit/fakemodel"
	"harness/testkit/registrytest"
	"harness/testkit/testagents"
)

// TestMain lets the test binary double as the harness command in scripts.
func TestMain(m *testing.M) {
	if code, ok := sandbox.HelperMain(); ok {
		os.Exit(code)
	}
	if len(os.Args) > 1 && os.Args[1] == image.InitArg {
		os.Exit(image.Main(os.Args[2:], os.Stderr))
	}
	testscript.Main(m, map[string]func(){
		"harness":   main,
		"fakeagent": fakeagent.Run,
		// The fixture agent under the name of an agent whose layout is
		// known (its skills directory).
		"claude-code-acp": fakeagent.Run,
	})
}

// TestScripts runs the end-to-end CLI scripts in testdata/script.
func TestScripts(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil && os.Getenv(testagents.RequireEnv) != "" {
		t.Fatal("bwrap not installed: the sandbox scripts need it (scripts/test installs bubblewrap)")
	}
	if _, err := exec.LookPath("fuse-overlayfs"); err != nil && os.Getenv(testagents.RequireEnv) != "" {
		t.Fatal("fuse-overlayfs not installed: the image scripts need it (scripts/test installs it)")
	}
	// Bun, for the scripts that run TypeScript graders: the one
	// scripts/test installs with the acp-harness peer.
	bunDir := mustAbs(t, "../../testdata/peer/node_modules/.bin")
	if _, err := os.Stat(filepath.Join(bunDir, "bun")); err != nil {
		if _, err := exec.LookPath("bun"); err != nil && os.Getenv(testagents.RequireEnv) != "" {
			t.Fatal("bun not installed: the suite example needs it (scripts/test installs it under testdata/peer)")
		}
		bunDir = ""
	}
	_, err := exec.LookPath(registrytest.Binary)
	registryUp := err == nil
	if !registryUp && os.Getenv(testagents.RequireEnv) != "" {
		t.Fatal("docker-registry not installed: the registry scripts need it (scripts/test installs it)")
	}
	taskImages := baseImageReady()
	if !taskImages && os.Getenv(testagents.RequireEnv) != "" {
		t.Fatal("podman or the task base image is missing: the task scripts need them (scripts/test installs podman and runs scripts/build-base-image)")
	}
	// The task images are unpacked once for all scripts.
	imageCache := t.TempDir()
	// One fixed record key for every script, outside their work
	// directories (as the user's key is outside theirs).
	keyFile := filepath.Join(t.TempDir(), "record.key")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("5a", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The scripts reach the cluster the [slurm] condition saw: the one
	// SLURM_CONF names (scripts/test exports the one it started), else
	// the machine's default configuration.
	slurmConf := os.Getenv("SLURM_CONF")
	slurmUp, slurmWhy := slurmCluster(slurmConf)
	if !slurmUp {
		if os.Getenv(RequireSlurmEnv) != "" {
			t.Fatalf("%s, and %s is set: run scripts/slurm-local start first", slurmWhy, RequireSlurmEnv)
		}
		t.Logf("the --slurm scripts are skipped: %s", slurmWhy)
	}
	regs := &registries{t: t, m: map[*testscript.TestScript]*registrytest.Registry{}}
	testscript.Run(t, testscript.Params{
		Dir:                 "../../testdata/script",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("TESTDATA", mustAbs(t, "../../testdata"))
			env.Setenv("IMAGECACHE", imageCache)
			// Each script has a judge cache of its own.
			env.Setenv("XDG_CACHE_HOME", filepath.Join(env.WorkDir, ".cache"))
			env.Setenv("HARNESS_RECORD_KEY_FILE", keyFile)
			if bunDir != "" {
				env.Setenv("PATH", bunDir+string(os.PathListSeparator)+env.Getenv("PATH"))
			}
			if slurmConf != "" {
				env.Setenv("SLURM_CONF", slurmConf)
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitlock":      waitLock,
			"waitfile":      waitFile,
			"fakejudge":     fakeJudge,
			"httpserver":    httpServer,
			"fakemodel":     fakeModel,
			"zstdcat":       zstdCat,
			"sign":          signLines,
			"envfile":       envFile,
			"registry":      regs.start,
			"push":          regs.push,
			"registryproxy": regs.proxy,
			"proxycount":    regs.proxyCount,
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "taskimages":
				return taskImages, nil
			case "registry":
				return registryUp, nil
			}
			if cond != "slurm" {
				return false, fmt.Errorf("unknown condition %q", cond)
			}
			return slurmUp, nil
		},
	})
}

// baseImageReady says whether podman and the base image of the task
// testdata (scripts/build-base-image) are here.
func baseImageReady() bool {
	if _, err := exec.LookPath("podman"); err != nil {
		return false
	}
	return exec.Command("podman", "image", "exists", "localhost/harness-base:bookworm").Run() == nil
}

// waitLock waits (up to 30 s) until another process holds a lock on the
// file: "waitlock FILE".
func waitLock(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitlock FILE")
	}
	name := ts.MkAbs(args[0])
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if f, err := os.Open(name); err == nil {
			err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
			if err == nil {
				syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			}
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	ts.Fatalf("%s: no process locked it within 30s", args[0])
}

// waitFile waits (up to 60 s) until the file exists: "waitfile FILE".
// A script signals a background process only once it is where the test
// needs it, however loaded the machine.
func waitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitfile FILE")
	}
	name := ts.MkAbs(args[0])
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(name); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	ts.Fatalf("%s: not created within 60s", args[0])
}

// fakeJudge starts an OpenAI-compatible chat completions server for the
// script and points OPENAI_BASE_URL and OPENAI_API_KEY at it: "fakejudge
// VERDICT" answers every request with pass VERDICT (true or false), score 1
// or 0, and 40 prompt and 8 completion tokens. The number of requests so far
// is in the file judge.count of the script's directory, and every request's
// body, one a line, in judge.requests.
func fakeJudge(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 || (args[0] != "true" && args[0] != "false") {
		ts.Fatalf("usage: fakejudge true|false")
	}
	pass := args[0] == "true"
	var n atomic.Int64
	count := ts.MkAbs("judge.count")
	requests := ts.MkAbs("judge.requests")
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		if f, err := os.OpenFile(requests, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			f.Write(append(body, '\n'))
			f.Close()
		}
		mu.Unlock()
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			http.NotFound(w, r)
			return
		}
		os.WriteFile(count, []byte(fmt.Sprint(n.Add(1))), 0o644)
		score := 0
		if pass {
			score = 1
		}
		content := fmt.Sprintf(`{"pass": %t, "score": %d, "reasoning": "the fake judge says %t"}`, pass, score, pass)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-fake", "object": "chat.completion",
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content}, "finish_reason": "stop"}},
			"usage":   map[string]any{"prompt_tokens": 40, "completion_tokens": 8, "total_tokens": 48},
		})
	}))
	ts.Defer(srv.Close)
	ts.Setenv("OPENAI_BASE_URL", srv.URL+"/v1")
	ts.Setenv("OPENAI_API_KEY", "fake-judge-key")
}

// httpServer starts a loopback HTTP server for the script that answers
// every request with "hello from NAME" and counts them in the file
// NAME.count of the script's directory: "httpserver NAME" sets NAME_PORT
// (upper case) to its port.
func httpServer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: httpserver NAME")
	}
	name := args[0]
	var n atomic.Int64
	count := ts.MkAbs(name + ".count")
	os.WriteFile(count, []byte("0"), 0o644)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		os.WriteFile(count, []byte(fmt.Sprint(n.Add(1))), 0o644)
		fmt.Fprintf(w, "hello from %s", name)
	}))
	ts.Defer(srv.Close)
	_, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
	ts.Setenv(strings.ToUpper(name)+"_PORT", port)
}

// fakeModel starts the fake Anthropic Messages server of the real-agent
// tests for the script, every answer reporting 111 input, 7 cached, 3
// cache-write and 22 output tokens, and points ANTHROPIC_BASE_URL at it:
// "fakemodel [-fail STATUS,...] [-user TURN|TURN...]" sets FAKEMODEL_PORT
// to its port; -fail answers the first requests with those HTTP
// statuses; -user scripts a simulated user that writes those turns
// ("{{last}}" is the agent's last message), then stops with the reason
// "goal reached". The number of requests it has served is in the file
// fakemodel.count of the script's directory.
func fakeModel(ts *testscript.TestScript, neg bool, args []string) {
	var opts fakemodel.Options
	for len(args) >= 2 && !neg {
		switch args[0] {
		case "-fail":
			for _, f := range strings.Split(args[1], ",") {
				status, err := strconv.Atoi(f)
				ts.Check(err)
				opts.Fail = append(opts.Fail, status)
			}
		case "-user":
			opts.UserTurns, opts.UserStop = strings.Split(args[1], "|"), "goal reached"
		default:
			ts.Fatalf("usage: fakemodel [-fail STATUS,...] [-user TURN|TURN...]")
		}
		args = args[2:]
	}
	if neg || len(args) != 0 {
		ts.Fatalf("usage: fakemodel [-fail STATUS,...] [-user TURN|TURN...]")
	}
	opts.Usage = &fakemodel.Usage{Input: 111, Cached: 7, CacheWrite: 3, Output: 22}
	count := ts.MkAbs("fakemodel.count")
	os.WriteFile(count, []byte("0"), 0o644)
	counted := func(log *fakemodel.Log, opts fakemodel.Options, done <-chan struct{}) http.Handler {
		h := fakemodel.Anthropic(log, opts, done)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r)
			os.WriteFile(count, []byte(fmt.Sprint(len(log.Requests()))), 0o644)
		})
	}
	srv := fakemodel.Start(counted, opts)
	ts.Defer(srv.Close)
	ts.Setenv("ANTHROPIC_BASE_URL", srv.URL)
	_, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
	ts.Setenv("FAKEMODEL_PORT", port)
}

// zstdCat writes the decompressed content of a zstd file (its frames one
// after another) to the script's stdout: "zstdcat FILE".
func zstdCat(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: zstdcat FILE")
	}
	f, err := os.Open(ts.MkAbs(args[0]))
	ts.Check(err)
	defer f.Close()
	zr, err := zstd.NewReader(f)
	ts.Check(err)
	defer zr.Close()
	_, err = io.Copy(ts.Stdout(), zr)
	ts.Check(err)
}

// signLines signs every JSON line of each file in place with the record
// key of the scripts, as harness signs the lines it writes: "sign FILE...".
// Lines that are not JSON (a record cut short) are left as they are.
func signLines(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: sign FILE...")
	}
	key, err := results.LoadKey(ts.Getenv(results.KeyFileEnv))
	ts.Check(err)
	for _, name := range args {
		b, err := os.ReadFile(ts.MkAbs(name))
		ts.Check(err)
		lines := strings.SplitAfter(string(b), "\n")
		for i, l := range lines {
			body := strings.TrimSuffix(l, "\n")
			if json.Valid([]byte(body)) && strings.HasPrefix(body, "{") {
				signed, _ := key.Sign([]byte(body))
				lines[i] = string(signed) + l[len(body):]
			}
		}
		ts.Check(os.WriteFile(ts.MkAbs(name), []byte(strings.Join(lines, "")), 0o644))
	}
}

// envFile sets an environment variable of the script to the contents of
// a file, less its final newline, as a CI system hands a secret to a step:
// "envfile NAME FILE".
func envFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: envfile NAME FILE")
	}
	b, err := os.ReadFile(ts.MkAbs(args[1]))
	ts.Check(err)
	ts.Setenv(args[0], strings.TrimSuffix(string(b), "\n"))
}

// RequireSlurmEnv, when set, turns a missing Slurm cluster into a failure
// instead of skipped scripts.
const RequireSlurmEnv = "HARNESS_REQUIRE_SLURM"

// slurmCluster reports whether a Slurm cluster answers under the
// configuration conf ("" for the default): sbatch is on PATH and sinfo
// lists a node that is up; if not, why.
func slurmCluster(conf string) (up bool, why string) {
	if _, err := exec.LookPath("sbatch"); err != nil {
		return false, "sbatch is not installed"
	}
	// sinfo retries a configuration it cannot read for a minute.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sinfo", "-h", "-o", "%T")
	where := "the default Slurm configuration"
	if conf != "" {
		if _, err := os.Stat(conf); err != nil {
			return false, fmt.Sprintf("SLURM_CONF=%s: %v", conf, err)
		}
		cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
		where = "SLURM_CONF=" + conf
	}
	out, err := cmd.CombinedOutput()
	state := strings.TrimSpace(string(out))
	switch {
	case err != nil:
		return false, fmt.Sprintf("sinfo (%s) failed: %v: %s", where, err, cli.FirstLine(state))
	case state == "":
		return false, fmt.Sprintf("sinfo (%s) lists no node", where)
	case strings.Contains(state, "down"):
		return false, fmt.Sprintf("sinfo (%s): a node is down (%s)", where, strings.Join(strings.Fields(state), " "))
	}
	return true, ""
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd + "/" + p
}
