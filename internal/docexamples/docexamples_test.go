package docexamples

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"harness/testkit/testagents"
)

// runsHarness is how a runnable example starts.
const runsHarness = "go run ./cmd/harness "

// example is one runnable example: its shell text, and where it is.
type example struct {
	file string // relative to the repository root
	line int
	text string
	// quickstart marks the README's Quickstart.
	quickstart bool
}

func (x example) String() string { return fmt.Sprintf("%s:%d", x.file, x.line) }

// TestExamples runs every runnable example of the documentation, as
// written, each in a fresh copy of the repository: it must exit 0. The
// README's Quickstart must be one of them, and it must say nothing but the
// run's progress: no warning on the first command a user types.
func TestExamples(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	examples, err := collect(root)
	if err != nil {
		t.Fatal(err)
	}
	var quickstart *example
	for i := range examples {
		if examples[i].quickstart {
			quickstart = &examples[i]
			break
		}
	}
	if quickstart == nil {
		t.Fatalf("README.md: the Quickstart has no example that runs from a checkout (a sh block starting with %q)", strings.TrimSpace(runsHarness))
	}
	for _, x := range examples {
		t.Run(x.String(), func(t *testing.T) {
			if strings.Contains(x.text, "testdata/peer/node_modules/.bin/bun") {
				if _, err := os.Stat(filepath.Join(root, "testdata/peer/node_modules/.bin/bun")); err != nil {
					if os.Getenv(testagents.RequireEnv) != "" {
						t.Fatalf("the example runs the peer's bun, which is not installed (scripts/test installs it), and %s is set", testagents.RequireEnv)
					}
					t.Skip("the example runs the peer's bun, which is not installed (scripts/test installs it)")
				}
			}
			if strings.Contains(x.text, "--sandbox bwrap") {
				if _, err := exec.LookPath("bwrap"); err != nil {
					if os.Getenv(testagents.RequireEnv) != "" {
						t.Fatalf("the example runs the sandbox, and bwrap is not installed (scripts/test installs bubblewrap), and %s is set", testagents.RequireEnv)
					}
					t.Skip("the example runs the sandbox, and bwrap is not installed (scripts/test installs bubblewrap)")
				}
			}
			stdout, stderr := run(t, root, x)
			if x.quickstart {
				checkQuickstart(t, stdout, stderr)
			}
		})
	}
}

// checkQuickstart checks what the Quickstart prints: a record per case of
// examples/quickstart/prompts.jsonl on stdout, all graded and passed, and
// no warning.
func checkQuickstart(t *testing.T, stdout, stderr string) {
	t.Helper()
	records := strings.Count(strings.TrimSpace(stdout), "\n") + 1
	if strings.TrimSpace(stdout) == "" || records != 4 {
		t.Errorf("the Quickstart wrote %d records to stdout, want the 4 cases", records)
	}
	if !strings.Contains(stderr, "4 records: pass 100.0% over 4 of 4 trials") {
		t.Errorf("the Quickstart does not end with 4 records: pass 100.0%% over 4 of 4 trials:\n%s", stderr)
	}
	if strings.Contains(strings.ToLower(stderr), "warning") {
		t.Errorf("the Quickstart warns:\n%s", stderr)
	}
}

// run runs x's text with bash in a fresh copy of the repository and
// returns what it printed; it fails the test unless bash exits 0.
func run(t *testing.T, root string, x example) (stdout, stderr string) {
	t.Helper()
	dir := t.TempDir()
	if err := copyTree(root, dir); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", x.text)
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if strings.Contains(x.text, runsHarness+"view ") {
		return runViewer(t, cmd, x, &out, &errOut)
	}
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s, as written:\n%s\nfailed: %v\nstdout:\n%s\nstderr:\n%s", x, x.text, err, tail(out.String()), errOut.String())
	}
	return out.String(), errOut.String()
}

// runViewer runs an example that ends by serving harness view: once the
// viewer prints its URL, the runs it lists must hold records; then an
// interrupt stops it, and the example must exit 0.
func runViewer(t *testing.T, cmd *exec.Cmd, x example, out, errOut *bytes.Buffer) (string, string) {
	t.Helper()
	pr, pw := io.Pipe()
	cmd.Stdout = io.MultiWriter(out, pw)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); pw.Close() }()
	urlLine := regexp.MustCompile(`harness view: (http://\S+)`)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := urlLine.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		io.Copy(io.Discard, pr)
	}()
	var u string
	select {
	case u = <-found:
	case err := <-done:
		t.Fatalf("%s: ended before the viewer printed its URL: %v\nstderr:\n%s", x, err, errOut.String())
	}
	var runs struct {
		Runs []struct {
			Sources []struct {
				Totals struct{ Trials int } `json:"totals"`
			} `json:"sources"`
		} `json:"runs"`
		Scanned bool `json:"scanned"`
	}
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(u + "api/runs")
		if err == nil {
			json.NewDecoder(resp.Body).Decode(&runs)
			resp.Body.Close()
		}
		if runs.Scanned || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Ctrl-C: the interrupt goes to the whole process group, as from a
	// terminal (go run and the shell end by it too, with a status of
	// their own).
	syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatalf("%s: the viewer did not end within 30 s of an interrupt", x)
	}
	if strings.Contains(errOut.String(), "panic:") {
		t.Errorf("%s: stderr:\n%s", x, errOut.String())
	}
	if len(runs.Runs) == 0 || len(runs.Runs[0].Sources) == 0 || runs.Runs[0].Sources[0].Totals.Trials == 0 {
		t.Errorf("%s: the viewer lists no run with trials: %+v", x, runs)
	}
	return out.String(), errOut.String()
}

func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

// collect finds the runnable examples of the documentation, in file order.
func collect(root string) ([]example, error) {
	files := []string{"README.md"}
	for _, pattern := range []string{"docs/*.md", "examples/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			return nil, err
		}
		for _, name := range m {
			rel, _ := filepath.Rel(root, name)
			files = append(files, filepath.ToSlash(rel))
		}
	}
	var all []example
	seen := map[string]bool{}
	for _, name := range files {
		f, err := os.Open(filepath.Join(root, name))
		if err != nil {
			return nil, err
		}
		xs, err := examplesIn(name, f)
		f.Close()
		if err != nil {
			return nil, err
		}
		for _, x := range xs {
			if key := commandsOf(x.text); !seen[key] {
				seen[key] = true
				all = append(all, x)
			}
		}
	}
	return all, nil
}

// inlineCommand is an inline code span that runs the harness from the
// checkout.
var inlineCommand = regexp.MustCompile("`(" + regexp.QuoteMeta(runsHarness) + "[^`]+)`")

// examplesIn reads the runnable examples of one markdown file: sh blocks
// whose first command runs the harness from the checkout, and inline
// spans that do.
func examplesIn(name string, r io.Reader) ([]example, error) {
	var out []example
	sc := bufio.NewScanner(r)
	var (
		inBlock, shBlock bool
		block            []string
		start, lineNo    int
		section          string
	)
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if fence, ok := strings.CutPrefix(trimmed, "```"); ok {
			if !inBlock {
				inBlock, block, start = true, nil, lineNo+1
				info := strings.Fields(fence)
				shBlock = len(info) > 0 && (info[0] == "sh" || info[0] == "bash")
				continue
			}
			inBlock = false
			if shBlock && runnable(block) {
				// The Quickstart is the section's first runnable block.
				quickstart := name == "README.md" && section == "Quickstart" && !slices.ContainsFunc(out, func(x example) bool { return x.quickstart })
				out = append(out, example{file: name, line: start, text: strings.Join(block, "\n"), quickstart: quickstart})
			}
			continue
		}
		if inBlock {
			block = append(block, line)
			continue
		}
		if h, ok := strings.CutPrefix(line, "## "); ok {
			section = strings.TrimSpace(h)
		}
		for _, m := range inlineCommand.FindAllStringSubmatch(line, -1) {
			out = append(out, example{file: name, line: lineNo, text: m[1]})
		}
	}
	if inBlock {
		return nil, fmt.Errorf("%s:%d: code block not closed", name, start-1)
	}
	return out, sc.Err()
}

// runnable says whether a shell block is an example that runs from a
// checkout: its first command runs the harness, or builds a program of the
// checkout (go build) that a later command of the block runs the harness
// with.
func runnable(block []string) bool {
	first := firstCommand(block)
	if strings.HasPrefix(first, runsHarness) {
		return true
	}
	if !strings.HasPrefix(first, "go build ") {
		return false
	}
	for _, l := range block {
		if strings.HasPrefix(strings.TrimSpace(l), runsHarness) {
			return true
		}
	}
	return false
}

// commandsOf is the text of a shell example without its comments and
// spacing, so that the same command written twice runs once.
func commandsOf(text string) string {
	var lines []string
	for l := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		if i := strings.Index(l, " #"); i >= 0 {
			l = l[:i]
		}
		if f := strings.Fields(l); len(f) > 0 {
			lines = append(lines, strings.Join(f, " "))
		}
	}
	return strings.Join(lines, "\n")
}

// firstCommand is the first line of a shell block that is neither blank
// nor a comment.
func firstCommand(block []string) string {
	for _, l := range block {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") {
			return l
		}
	}
	return ""
}

// copyTree copies the repository at root into dir, as a checkout has it:
// without .git, and with the installed packages (node_modules) linked, not
// copied.
func copyTree(root, dir string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dir, rel)
		switch {
		case d.IsDir() && d.Name() == ".git":
			return filepath.SkipDir
		case d.IsDir() && d.Name() == "node_modules":
			if err := os.Symlink(path, target); err != nil {
				return err
			}
			return filepath.SkipDir
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case !d.Type().IsRegular():
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return copyFile(path, target, info.Mode().Perm())
	})
}

func copyFile(from, to string, perm fs.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// TestExamplesIn checks which parts of a markdown file are runnable
// examples: sh blocks whose first command runs the harness from the
// checkout, inline spans that are such a command; not other blocks, nor
// blocks that start with another command.
func TestExamplesIn(t *testing.T) {
	const md = "# Title\n\n" +
		"Try `go run ./cmd/harness schemas` or `harness schemas`.\n\n" +
		"## Quickstart\n\n" +
		"```sh\n# a comment\ngo run ./cmd/harness capture p.jsonl \\\n    -- ./agent\n```\n\n" +
		"```sh\nscripts/test\ngo run ./cmd/harness version\n```\n\n" +
		"```sh\ngo build -o /tmp/a ./x\ngo run ./cmd/harness capture p.jsonl -- /tmp/a\n```\n\n" +
		"```sh\ngo build ./...\n```\n\n" +
		"```yaml\ngo run ./cmd/harness version\n```\n\n" +
		"## More\n\n" +
		"```bash\ngo run ./cmd/harness version   # the build\n```\n"
	xs, err := examplesIn("README.md", strings.NewReader(md))
	if err != nil {
		t.Fatal(err)
	}
	want := []example{
		{file: "README.md", line: 3, text: "go run ./cmd/harness schemas"},
		{file: "README.md", line: 8, text: "# a comment\ngo run ./cmd/harness capture p.jsonl \\\n    -- ./agent", quickstart: true},
		{file: "README.md", line: 19, text: "go build -o /tmp/a ./x\ngo run ./cmd/harness capture p.jsonl -- /tmp/a"},
		{file: "README.md", line: 34, text: "go run ./cmd/harness version   # the build"},
	}
	if !reflect.DeepEqual(xs, want) {
		t.Errorf("examplesIn:\n got %#v\nwant %#v", xs, want)
	}
	if _, err := examplesIn("x.md", strings.NewReader("```sh\ngo run ./cmd/harness version\n")); err == nil || !strings.Contains(err.Error(), "x.md:1: code block not closed") {
		t.Errorf("an unclosed block: %v", err)
	}
	if got := commandsOf("# c\ngo run ./cmd/harness  run s.yaml   # note"); got != "go run ./cmd/harness run s.yaml" {
		t.Errorf("commandsOf = %q", got)
	}
}
