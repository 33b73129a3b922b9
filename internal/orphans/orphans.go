// Package orphans keeps the processes an agent, a terminal command or a
// grader starts from outliving it, whether or not they left its process
// group (setsid, double forks, daemons).
//
// Every process harness starts gets a token in its environment (EnvVar),
// which its descendants inherit. When the process ends or is killed, Kill
// finds every process still carrying its token and kills it. Harness is
// made a child subreaper (Enable), so descendants orphaned on the way are
// reparented to harness rather than to init, and Kill reaps those it kills.
// A descendant that clears its environment escapes the token; the sandbox
// (bubblewrap's PID namespace) is what contains such a process.
package orphans

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// EnvVar is the environment variable that carries a process tree's token.
const EnvVar = "HARNESS_PROC"

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER of prctl(2).
const prSetChildSubreaper = 36

// Enable makes the calling process a child subreaper: orphaned descendants
// are reparented to it instead of to init.
func Enable() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return errno
	}
	return nil
}

// Token is a new process-tree token.
func Token() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Env returns env with the token set (any earlier value replaced).
func Env(env []string, token string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, EnvVar+"=") {
			out = append(out, kv)
		}
	}
	return append(out, EnvVar+"="+token)
}

// Kill kills every process whose environment carries token, except the
// process except (the one harness waits for itself), and reaps those that
// were reparented to this process. It scans again until none is left (a
// dying tree may still fork), for at most a few rounds, and returns how
// many it killed.
func Kill(token string, except int) int {
	want := []byte("\x00" + EnvVar + "=" + token + "\x00")
	self := os.Getpid()
	killed := 0
	for round := 0; round < 5; round++ {
		pids := marked(want, self, except)
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
		for _, pid := range pids {
			if parent(pid) == self {
				reap(pid)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return killed
}

// marked lists the live processes whose environment holds want.
func marked(want []byte, self, except int) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || pid == self || pid == except {
			continue
		}
		env, err := os.ReadFile(d + "/environ")
		if err != nil || !bytes.Contains(append(append([]byte{0}, env...), 0), want) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// parent returns the parent pid of pid, or 0.
func parent(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// reap waits for a killed child of ours, without blocking for long.
func reap(pid int) {
	for i := 0; i < 100; i++ {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		if got == pid || err != nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
