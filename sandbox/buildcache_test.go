package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// recordingRunner keeps the commands it is asked to wrap.
type recordingRunner struct{ got []Command }

func (r *recordingRunner) Wrap(c Command) (Wrapped, error) {
	r.got = append(r.got, c)
	return None{}.Wrap(c)
}

func (r *recordingRunner) Info() Info { return Info{Backend: "test"} }

func TestBuildCacheIsSharedWritableAndRemoved(t *testing.T) {
	tmp := t.TempDir()
	mod := filepath.Join(t.TempDir(), "mod")
	if err := os.Mkdir(mod, 0o755); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"GOMODCACHE": mod}
	c := NewBuildCache(tmp, func(k string) string { return env[k] })
	if c.Dir() != "" {
		t.Fatalf("cache made before any command: %s", c.Dir())
	}
	rec := &recordingRunner{}
	r := c.Runner(rec)
	var envs [][]string
	for _, ws := range []string{"/ws/1", "/ws/2"} {
		w, err := r.Wrap(Command{Argv: []string{"go", "test"}, Dir: ws, Env: []string{"PATH=/bin", "GOCACHE=/host/cache"}, RW: []string{ws}, Disk: []string{ws}})
		if err != nil {
			t.Fatal(err)
		}
		envs = append(envs, w.Env)
	}
	dir := c.Dir()
	if dir == "" || filepath.Dir(dir) != tmp {
		t.Fatalf("cache dir %q, want one in %s", dir, tmp)
	}
	for i, cmd := range rec.got {
		if !slices.Contains(cmd.RW, dir) || !slices.Contains(cmd.Disk, dir) || !slices.Contains(cmd.RW, cmd.Dir) {
			t.Errorf("command %d: RW %v, Disk %v: want its workspace and %s", i, cmd.RW, cmd.Disk, dir)
		}
		if !slices.Contains(cmd.RO, mod) || slices.Contains(cmd.RW, mod) {
			t.Errorf("command %d: RO %v, RW %v: want the module cache %s read-only", i, cmd.RO, cmd.RW, mod)
		}
	}
	for i, e := range envs {
		for _, want := range []string{"GOCACHE=" + filepath.Join(dir, "go-build"), "npm_config_cache=" + filepath.Join(dir, "npm"),
			"PIP_CACHE_DIR=" + filepath.Join(dir, "pip"), "GOMODCACHE=" + mod, "PATH=/bin"} {
			if !slices.Contains(e, want) {
				t.Errorf("command %d env %v: no %s", i, e, want)
			}
		}
		if slices.Contains(e, "GOCACHE=/host/cache") {
			t.Errorf("command %d env %v: the host's GOCACHE is kept", i, e)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "go-build")); err != nil || !st.IsDir() {
		t.Fatalf("go-build: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go-build", "x"), []byte("x"), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cache dir left after Remove: %v", err)
	}
	if _, err := r.Wrap(Command{Argv: []string{"true"}}); err == nil {
		t.Error("a command wrapped after Remove got a cache")
	}
}

func TestBuildCacheFindsTheHostModuleCache(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"GOMODCACHE": "/m", "GOPATH": "/g", "HOME": "/h"}, "/m"},
		{map[string]string{"GOPATH": "/g1:/g2", "HOME": "/h"}, "/g1/pkg/mod"},
		{map[string]string{"HOME": "/h"}, "/h/go/pkg/mod"},
		{map[string]string{"GOMODCACHE": "rel"}, ""},
		{map[string]string{}, ""},
	} {
		if got := hostModCache(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.env, got, tc.want)
		}
	}
	// One that does not exist is not bound.
	c := NewBuildCache(t.TempDir(), func(k string) string { return map[string]string{"GOMODCACHE": "/no/such/dir"}[k] })
	if c.ModCache() != "" {
		t.Errorf("module cache %q bound though it does not exist", c.ModCache())
	}
}
