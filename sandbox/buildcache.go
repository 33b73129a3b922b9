package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// BuildCache is the build cache the sandboxed graders of one run share. A
// sandboxed command starts in an empty HOME, so a test suite run in each
// trial's workspace (go test, npm test, pytest) would otherwise rebuild or
// download everything it depends on in every trial. Commands wrapped by
// Runner get:
//
//   - GOCACHE, npm_config_cache and PIP_CACHE_DIR: directories of the
//     run's cache directory, writable, shared by the run's graders;
//   - GOMODCACHE: the host's Go module cache, bound read-only, when it
//     exists (a module missing from it cannot be added from inside).
//
// The cache directory is made on first use, in the temporary directory,
// and Remove deletes it at the end of the run: what a grader writes there
// (a grader runs code the agent wrote) reaches the run's later graders
// and nothing else; no cache of the host's is writable. The agent's own
// commands never see it.
type BuildCache struct {
	tmpDir   string
	modCache string

	mu      sync.Mutex
	dir     string
	removed bool
}

// Subdirectories of the cache directory, and the variables naming them.
var buildCacheDirs = []struct{ name, env string }{
	{"go-build", "GOCACHE"},
	{"npm", "npm_config_cache"},
	{"pip", "PIP_CACHE_DIR"},
}

// NewBuildCache returns a run's build cache, made in tmpDir ("" = the
// system temp dir) when a command first needs it. getenv is harness's
// own environment, where the host's Go module cache is found (GOMODCACHE,
// else the first GOPATH entry's pkg/mod, else ~/go/pkg/mod).
func NewBuildCache(tmpDir string, getenv func(string) string) *BuildCache {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := &BuildCache{tmpDir: tmpDir}
	if m := hostModCache(getenv); m != "" {
		if st, err := os.Stat(m); err == nil && st.IsDir() {
			c.modCache = m
		}
	}
	return c
}

// hostModCache is where the go command keeps modules on the host, or "".
func hostModCache(getenv func(string) string) string {
	if m := getenv("GOMODCACHE"); m != "" {
		if filepath.IsAbs(m) {
			return filepath.Clean(m)
		}
		return ""
	}
	gopath := ""
	if list := filepath.SplitList(getenv("GOPATH")); len(list) > 0 {
		gopath = list[0]
	}
	if gopath == "" {
		home := getenv("HOME")
		if home == "" {
			return ""
		}
		gopath = filepath.Join(home, "go")
	}
	if !filepath.IsAbs(gopath) {
		return ""
	}
	return filepath.Join(gopath, "pkg", "mod")
}

// Dir is the cache directory, "" until a command has needed it.
func (c *BuildCache) Dir() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dir
}

// ModCache is the host's Go module cache bound read-only ("" for none).
func (c *BuildCache) ModCache() string { return c.modCache }

// make returns the cache directory, making it the first time.
func (c *BuildCache) make() (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.removed {
		return "", errors.New("the run's build cache is already removed")
	}
	if c.dir != "" {
		return c.dir, nil
	}
	dir, err := os.MkdirTemp(c.tmpDir, "harness-build-cache-")
	if err != nil {
		return "", err
	}
	for _, d := range buildCacheDirs {
		if err := os.Mkdir(filepath.Join(dir, d.name), 0o700); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
	}
	c.dir = dir
	return dir, nil
}

// env is what the cache sets in a command's environment.
func (c *BuildCache) env(dir string) []string {
	var env []string
	for _, d := range buildCacheDirs {
		env = append(env, d.env+"="+filepath.Join(dir, d.name))
	}
	if c.modCache != "" {
		env = append(env, "GOMODCACHE="+c.modCache)
	}
	return env
}

// Remove deletes the cache directory; commands wrapped afterwards fail.
// Call it once the run's graders are done.
func (c *BuildCache) Remove() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removed = true
	if c.dir == "" {
		return nil
	}
	dir := c.dir
	c.dir = ""
	// The go command makes its cache files read-only; RemoveAll copes.
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove the build cache %s: %w", dir, err)
	}
	return nil
}

// Runner returns r with the cache given to every command it wraps.
func (c *BuildCache) Runner(r Runner) Runner { return cachedRunner{r: r, c: c} }

// cachedRunner wraps commands with the run's build cache bound in.
type cachedRunner struct {
	r Runner
	c *BuildCache
}

// Wrap binds the cache directory writable (under the command's disk cap)
// and the host's module cache read-only, and sets their variables.
func (cr cachedRunner) Wrap(cmd Command) (Wrapped, error) {
	dir, err := cr.c.make()
	if err != nil {
		return Wrapped{}, fmt.Errorf("sandbox build cache: %w", err)
	}
	cmd.RW = append(slices.Clone(cmd.RW), dir)
	cmd.Disk = append(slices.Clone(cmd.Disk), dir)
	if cr.c.modCache != "" {
		cmd.RO = append(slices.Clone(cmd.RO), cr.c.modCache)
	}
	cmd.SetEnv = append(slices.Clone(cmd.SetEnv), cr.c.env(dir)...)
	return cr.r.Wrap(cmd)
}

// Info is the wrapped runner's.
func (cr cachedRunner) Info() Info { return cr.r.Info() }
