package orphans

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// childrenOf lists the pids whose parent is pid, with their state.
func childrenOf(pid int) map[int]string {
	out := map[int]string{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			n, _ := strconv.Atoi(filepath.Base(d))
			out[n] = f[0]
		}
	}
	return out
}

// TestKillTakesSetsidOrphans: a process that left its parent's group and
// session and was orphaned is adopted (subreaper), found by its token,
// killed and reaped: no process and no zombie is left.
func TestKillTakesSetsidOrphans(t *testing.T) {
	if err := Enable(); err != nil {
		t.Fatalf("PR_SET_CHILD_SUBREAPER: %v", err)
	}
	token := Token()
	cmd := exec.Command("/bin/sh", "-c", "setsid sleep 303.5 & exit 0")
	cmd.Env = Env(os.Environ(), token)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	self := os.Getpid()
	var adopted int
	for i := 0; i < 100 && adopted == 0; i++ {
		for pid := range childrenOf(self) {
			if env, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ"); strings.Contains(string(env), EnvVar+"="+token) {
				adopted = pid
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if adopted == 0 {
		t.Fatal("the orphan was not reparented to this process")
	}
	if n := Kill(token, 0); n < 1 {
		t.Errorf("Kill killed %d processes", n)
	}
	if st, ok := childrenOf(self)[adopted]; ok {
		t.Errorf("the orphan is still a child of ours (state %s)", st)
	}
	if n := Kill(token, 0); n != 0 {
		t.Errorf("a second Kill found %d processes", n)
	}
}

func TestEnvReplacesToken(t *testing.T) {
	env := Env([]string{"A=1", EnvVar + "=old", "B=2"}, "new")
	if strings.Join(env, " ") != "A=1 B=2 "+EnvVar+"=new" {
		t.Errorf("Env = %q", env)
	}
}
