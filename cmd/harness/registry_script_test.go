package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/rogpeppe/go-internal/testscript"

	"harness/testkit/registrytest"
)

// scriptTB is the testing.TB a script's commands hand to registrytest:
// its failures fail the script, its cleanups run when the script ends. A
// script cannot be skipped from a command: scripts that start a registry
// skip first on the [registry] condition.
type scriptTB struct {
	testing.TB
	ts *testscript.TestScript
}

func (s scriptTB) Helper()                           {}
func (s scriptTB) Fatal(args ...any)                 { s.ts.Fatalf("%s", fmt.Sprint(args...)) }
func (s scriptTB) Fatalf(format string, args ...any) { s.ts.Fatalf(format, args...) }
func (s scriptTB) Skip(args ...any)                  { s.ts.Fatalf("%s", fmt.Sprint(args...)) }
func (s scriptTB) Cleanup(f func())                  { s.ts.Defer(f) }
func (s scriptTB) Logf(format string, args ...any)   { s.ts.Logf(format, args...) }
func (s scriptTB) TempDir() string {
	d, err := os.MkdirTemp(s.ts.Getenv("WORK"), "registry-")
	s.ts.Check(err)
	return d
}

// registries are the scripts' running registries, by script.
type registries struct {
	t  testing.TB
	mu sync.Mutex
	m  map[*testscript.TestScript]*registrytest.Registry
	// proxies are the scripts' counting proxies, by script.
	proxies map[*testscript.TestScript]*registrytest.Proxy
	// base is the task base image's layer, made once for every push of
	// every script.
	baseOnce sync.Once
	base     v1.Layer
	baseErr  error
}

// start is "registry": it starts a registry (Debian's docker-registry,
// plain HTTP) until the script ends and sets REGISTRY to its host:port.
func (r *registries) start(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: registry")
	}
	reg := registrytest.Start(scriptTB{TB: r.t, ts: ts}, registrytest.Options{})
	r.mu.Lock()
	r.m[ts] = reg
	r.mu.Unlock()
	ts.Defer(func() {
		r.mu.Lock()
		delete(r.m, ts)
		r.mu.Unlock()
	})
	ts.Setenv("REGISTRY", reg.Host)
}

// proxy is "registryproxy": it starts a proxy in front of the script's
// registry that counts the requests it passes on, until the script ends,
// and sets PROXY to its host:port.
func (r *registries) proxy(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: registryproxy")
	}
	r.mu.Lock()
	reg := r.m[ts]
	r.mu.Unlock()
	if reg == nil {
		ts.Fatalf("registryproxy: no registry (run registry first)")
	}
	p := registrytest.NewProxy(scriptTB{TB: r.t, ts: ts}, reg.Host)
	r.mu.Lock()
	if r.proxies == nil {
		r.proxies = map[*testscript.TestScript]*registrytest.Proxy{}
	}
	r.proxies[ts] = p
	r.mu.Unlock()
	ts.Defer(func() {
		r.mu.Lock()
		delete(r.proxies, ts)
		r.mu.Unlock()
	})
	ts.Setenv("PROXY", p.Host)
}

// proxyCount is "proxycount": it writes to stdout what the script's
// proxy has passed on: "requests R; blob GETs G of B blobs, at most M
// of one".
func (r *registries) proxyCount(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: proxycount")
	}
	r.mu.Lock()
	p := r.proxies[ts]
	r.mu.Unlock()
	if p == nil {
		ts.Fatalf("proxycount: no proxy (run registryproxy first)")
	}
	all, _ := p.BlobGets()
	gets, most := 0, 0
	for _, n := range all {
		gets += n
		most = max(most, n)
	}
	fmt.Fprintf(ts.Stdout(), "requests %d; blob GETs %d of %d blobs, at most %d of one\n", p.Requests(), gets, len(all), most)
}

// push is "push REPO:TAG [DIR]": it pushes to the script's registry an
// image of the task base image's root filesystem with a layer of DIR's
// files on top (DIR's paths taken from /) and WORKDIR /app, and sets
// DIGEST to the manifest digest the registry has.
func (r *registries) push(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: push REPO:TAG [DIR]")
	}
	r.mu.Lock()
	reg := r.m[ts]
	r.mu.Unlock()
	if reg == nil {
		ts.Fatalf("push: no registry (run registry first)")
	}
	base := registrytest.BaseTar()
	if base == "" {
		ts.Fatalf("push: the task base image's tar is not cached (scripts/build-base-image)")
	}
	files := map[string]string{}
	if len(args) == 2 {
		root := ts.MkAbs(args[1])
		ts.Check(filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err != nil || fi.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			files["/"+filepath.ToSlash(rel)] = string(b)
			return nil
		}))
	}
	tb := scriptTB{TB: r.t, ts: ts}
	r.baseOnce.Do(func() { r.base, r.baseErr = registrytest.TarLayer(base) })
	ts.Check(r.baseErr)
	img := registrytest.FromLayer(tb, r.base, v1.Config{WorkingDir: "/app", Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}, files)
	_, digest := reg.Push(tb, strings.TrimPrefix(args[0], reg.Host+"/"), img)
	ts.Setenv("DIGEST", digest)
}
