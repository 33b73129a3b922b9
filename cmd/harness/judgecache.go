package main

import (
	"context"
	"fmt"
	"harness/cli"
	"path/filepath"
	"sync"

	"github.com/spf13/pflag"

	"harness/graders"
	"harness/judgecache"
	"harness/review"
	"harness/schemas"
)

// judgeCacheFlags are the judge cache options of every command that runs
// graders.
type judgeCacheFlags struct {
	noCache bool
	dir     string
	max     int64
}

func (f *judgeCacheFlags) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&f.noCache, "no-cache", false, "ask the judge model for every grading: neither read nor write the judge cache")
	fs.StringVar(&f.dir, "judge-cache", "", "keep LLM judge answers in `dir` (default $XDG_CACHE_HOME/harness/judge, else ~/.cache/harness/judge)")
	fs.Int64Var(&f.max, "judge-cache-max", judgecache.DefaultMaxBytes, "cap the judge cache at `bytes`, dropping the least recently used answers (0: no cap)")
}

// open returns the judge cache the flags ask for, or nil with --no-cache.
// A cache that cannot be used is reported on stderr once and grading goes
// on without it.
func (f *judgeCacheFlags) open(e *cli.Env) (*judgecache.Cache, error) {
	if f.noCache {
		return nil, nil
	}
	if f.max < 0 {
		return nil, cli.Usagef("--judge-cache-max must not be negative")
	}
	dir := f.dir
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
	return judgecache.New(dir, f.max, warn), nil
}

// drawCounter numbers the gradings of each trial, so that repeated
// gradings of one record (calibrate --repeat) are separate judge draws,
// each cached on its own, while the first is the draw a plain grading
// makes.
func drawCounter(fn review.GradeFunc) review.GradeFunc {
	var mu sync.Mutex
	draws := map[[2]any]int{}
	return func(ctx context.Context, rec *schemas.CaptureRecord, c *schemas.PromptCase) schemas.GraderResult {
		mu.Lock()
		k := [2]any{rec.ID, rec.Trial}
		draws[k]++
		n := draws[k]
		mu.Unlock()
		return fn(graders.WithJudgeDraw(ctx, n), rec, c)
	}
}
