package limits

import (
	"os"
	"os/exec"
	"testing"
)

// BenchmarkStartPlainBwrap is the floor: one bwrap start running true.
func BenchmarkStartPlainBwrap(b *testing.B) {
	bwrap := requireBwrap(b)
	exe, _ := os.Executable()
	argv := append(bwrapArgs(bwrap, exe, ""), "true")
	for b.Loop() {
		if err := exec.Command(argv[0], argv[1:]...).Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStartCappedBwrap is the same start under every cap: New (the
// cgroups made), the wrapper (a shell) joining them, Start, Wait, Close
// (the cgroups removed).
func BenchmarkStartCappedBwrap(b *testing.B) {
	benchCapped(b, Options{})
}

// BenchmarkStartCappedBwrapNoCgroup is the fallback: the wrapper sets
// RLIMIT_DATA and the watcher walks the process tree.
func BenchmarkStartCappedBwrapNoCgroup(b *testing.B) {
	benchCapped(b, Options{NoCgroup: true})
}

func benchCapped(b *testing.B, opts Options) {
	bwrap := requireBwrap(b)
	exe, _ := os.Executable()
	ws := b.TempDir()
	opts.DiskDirs = []string{ws}
	c := Caps{MemoryBytes: 1 << 30, Pids: 1024, CPUs: 1, DiskBytes: 1 << 30}
	for b.Loop() {
		g, _, err := New(c, opts)
		if err != nil {
			b.Fatal(err)
		}
		argv := append(g.WrapperArgs(), bwrapArgs(bwrap, exe, ws)...)
		argv = append(argv, "true")
		cmd := exec.Command(argv[0], argv[1:]...)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		g.Start(cmd.Process.Pid, func() {})
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		if err := g.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGroupNewClose is the cgroup part of a capped start: making
// the groups with their caps and removing them.
func BenchmarkGroupNewClose(b *testing.B) {
	c := Caps{MemoryBytes: 1 << 30, Pids: 1024, CPUs: 1}
	for b.Loop() {
		g, _, err := New(c, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := g.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
