package cli

import (
	"fmt"
	"path/filepath"
	"sync"

	"github.com/spf13/pflag"

	"harness/judgecache"
)

// JudgeCacheFlags are the judge cache options of every command that runs
// graders.
type JudgeCacheFlags struct {
	NoCache bool
	Dir     string
	Max     int64
}

// AddFlags defines the flags on fs.
func (f *JudgeCacheFlags) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&f.NoCache, "no-cache", false, "ask the judge model for every grading: neither read nor write the judge cache")
	fs.StringVar(&f.Dir, "judge-cache", "", "keep LLM judge answers in `dir` (default $XDG_CACHE_HOME/harness/judge, else ~/.cache/harness/judge)")
	fs.Int64Var(&f.Max, "judge-cache-max", judgecache.DefaultMaxBytes, "cap the judge cache at `bytes`, dropping the least recently used answers (0: no cap)")
}

// Open returns the judge cache the flags ask for, or nil with --no-cache.
// A cache that cannot be used is reported on stderr once and grading goes
// on without it.
func (f *JudgeCacheFlags) Open(e *Env) (*judgecache.Cache, error) {
	if f.NoCache {
		return nil, nil
	}
	if f.Max < 0 {
		return nil, Usagef("--judge-cache-max must not be negative")
	}
	dir := f.Dir
	if dir == "" {
		d, err := judgecache.Dir(e.Getenv)
		if err != nil {
			fmt.Fprintf(e.Stderr, "harness: %v; judging without a cache\n", err)
			return nil, nil
		}
		dir = d
	} else if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	var mu sync.Mutex
	warn := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(e.Stderr, "harness: %v; judge answers are not kept\n", err)
	}
	return judgecache.New(dir, f.Max, warn), nil
}
