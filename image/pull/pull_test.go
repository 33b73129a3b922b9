package pull

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"harness/testkit/registrytest"
)

func synthetic(t *testing.T, tag string) v1.Image {
	return registrytest.Synthetic(t, v1.Config{WorkingDir: "/app", Env: []string{"TAG=" + tag}},
		map[string]string{"/etc/os-release": "ID=test\n", "/bin/hello": "#!/bin/sh\necho " + tag + "\n"},
		map[string]string{"/app/data.txt": numbered(tag, 20000)})
}

func numbered(tag string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%s line %d\n", tag, i*7919%100003)
	}
	return b.String()
}

func newClient(t *testing.T, tr *registrytest.Registry) *Client {
	return &Client{Store: &Store{Dir: t.TempDir()}, Transport: tr.Transport, Keychain: authn.NewMultiKeychain(), Backoff: 10 * time.Millisecond}
}

func TestPullByTagRecordsTheRegistrysDigestAndStoresEveryBlob(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	ref, digest := reg.Push(t, "tasks/hello:v1", synthetic(t, "v1"))
	c := newClient(t, reg)
	if c.Store.Lookup(ref) != nil {
		t.Fatal("an empty store has the image")
	}
	var events []Progress
	c.OnProgress = func(p Progress) { events = append(events, p) }
	rec, err := c.Pull(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Digest != digest || rec.Layers != 2 || rec.Platform != "linux/amd64" {
		t.Fatalf("record %+v, want digest %s, 2 layers, linux/amd64", rec, digest)
	}
	if got := c.Store.Lookup(ref); got == nil || got.Digest != digest {
		t.Fatalf("Lookup after the pull: %+v", got)
	}
	if !c.Store.Complete(digest) {
		t.Fatal("the store lacks a blob of the image")
	}
	last := events[len(events)-1]
	if len(events) != 3 || last.Layer != 2 || last.Bytes != last.Total || last.Fetched != last.Total {
		t.Fatalf("progress events %+v", events)
	}
	// The same image again: nothing fetched.
	events = nil
	if _, err := c.Pull(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	if last := events[len(events)-1]; last.Fetched != 0 || !last.Stored {
		t.Fatalf("second pull fetched %d bytes", last.Fetched)
	}
}

func TestPullPicksThePlatformOfAnIndex(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	amd := synthetic(t, "amd64")
	arm := registrytest.Synthetic(t, v1.Config{}, map[string]string{"/arm": "arm"})
	cf, _ := arm.ConfigFile()
	cf = cf.DeepCopy()
	cf.Architecture = "arm64"
	arm, _ = mutate.ConfigFile(arm, cf)
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}})
	ref := reg.Host + "/multi/arch:latest"
	reg.PushIndex(t, ref, idx)
	c := newClient(t, reg)
	c.Platform = v1.Platform{OS: "linux", Architecture: "amd64"}
	rec, err := c.Pull(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := amd.Digest()
	idxDigest, _ := idx.Digest()
	if rec.Digest != want.String() || rec.IndexDigest != idxDigest.String() {
		t.Fatalf("pulled %s (index %s), want the amd64 manifest %s of index %s", rec.Digest, rec.IndexDigest, want, idxDigest)
	}
}

func TestPullOverTLSWithBasicAuth(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{TLS: true, User: "alice", Password: "s3cret"})
	ref, digest := reg.Push(t, "private/img:1", synthetic(t, "private"))
	c := newClient(t, reg)

	// No credentials: said as such.
	_, err := c.Pull(context.Background(), ref)
	var pe *Error
	if !errors.As(err, &pe) || pe.Kind != Unauthorized || !pe.Anonymous || !strings.Contains(err.Error(), "wants credentials and none are stored") {
		t.Fatalf("pull without credentials: %v", err)
	}
	// Wrong password: said as such.
	c.Keychain = staticKeychain{authn.Basic{Username: "alice", Password: "wrong"}}
	_, err = c.Pull(context.Background(), ref)
	if !errors.As(err, &pe) || pe.Kind != Unauthorized || pe.Anonymous || !strings.Contains(err.Error(), "refused the stored credentials") {
		t.Fatalf("pull with a wrong password: %v", err)
	}
	if strings.Contains(err.Error(), "wrong\"") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("the error shows a password: %v", err)
	}
	// The right ones, from the Docker auth file the default keychain reads.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"auths":{"`+reg.Host+`":{"auth":"YWxpY2U6czNjcmV0"}}}`), 0o600)
	t.Setenv("DOCKER_CONFIG", dir)
	t.Setenv("REGISTRY_AUTH_FILE", filepath.Join(dir, "none.json"))
	c.Keychain = nil
	rec, err := c.Pull(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Digest != digest {
		t.Fatalf("digest %s, want %s", rec.Digest, digest)
	}
}

type staticKeychain struct{ b authn.Basic }

func (k staticKeychain) Resolve(authn.Resource) (authn.Authenticator, error) { return &k.b, nil }

func TestMissingTagIsNotFound(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	reg.Push(t, "tasks/hello:v1", synthetic(t, "v1"))
	c := newClient(t, reg)
	_, err := c.Pull(context.Background(), reg.Host+"/tasks/hello:nope")
	var pe *Error
	if !errors.As(err, &pe) || pe.Kind != NotFound || !strings.Contains(err.Error(), "not found in registry "+reg.Host) {
		t.Fatalf("missing tag: %v", err)
	}
}

func TestRegistryDownIsUnavailable(t *testing.T) {
	c := &Client{Store: &Store{Dir: t.TempDir()}, Keychain: authn.NewMultiKeychain(), Attempts: 2, Backoff: time.Millisecond}
	_, err := c.Pull(context.Background(), "127.0.0.1:1/tasks/hello:v1")
	var pe *Error
	if !errors.As(err, &pe) || pe.Kind != Unavailable || !strings.Contains(err.Error(), "registry 127.0.0.1:1 cannot be reached") {
		t.Fatalf("registry down: %v", err)
	}
}

func TestTooManyRequestsWaitsRetryAfter(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	reg.Push(t, "tasks/hello:v1", synthetic(t, "v1"))
	proxy := registrytest.NewProxy(t, reg.Host)
	c := newClient(t, reg)
	var waits []time.Duration
	c.OnRetry = func(_ string, d time.Duration, _ string) { waits = append(waits, d) }
	proxy.TooMany(1, "1")
	if _, err := c.Pull(context.Background(), proxy.Host+"/tasks/hello:v1"); err != nil {
		t.Fatal(err)
	}
	if len(waits) != 1 || waits[0] != time.Second {
		t.Fatalf("waits %v, want the one second of Retry-After", waits)
	}
	times := proxy.ManifestTimes()
	if len(times) < 2 || times[1].Sub(times[0]) < time.Second {
		t.Fatalf("the retry came %v after the 429, before its Retry-After", times[1].Sub(times[0]))
	}
}

func TestCutLayerDownloadResumes(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	_, digest := reg.Push(t, "tasks/hello:v1", synthetic(t, "v1"))
	proxy := registrytest.NewProxy(t, reg.Host)
	c := newClient(t, reg)
	proxy.Cut(1, 4096)
	rec, err := c.Pull(context.Background(), proxy.Host+"/tasks/hello:v1")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Digest != digest || !c.Store.Complete(digest) {
		t.Fatalf("pulled %s, complete %v", rec.Digest, c.Store.Complete(digest))
	}
	_, ranged := proxy.BlobGets()
	n := 0
	for _, v := range ranged {
		n += v
	}
	if n != 1 {
		t.Fatalf("range requests %v, want one resuming the cut layer", ranged)
	}
}

func TestConcurrentPullsFetchEachLayerOnce(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	reg.Push(t, "tasks/hello:v1", synthetic(t, "v1"))
	proxy := registrytest.NewProxy(t, reg.Host)
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A client and store of its own, as another run has.
			c := &Client{Store: &Store{Dir: dir}, Keychain: authn.NewMultiKeychain()}
			_, errs[i] = c.Pull(context.Background(), proxy.Host+"/tasks/hello:v1")
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	all, _ := proxy.BlobGets()
	m, _ := (&Store{Dir: dir}).Manifest((&Store{Dir: dir}).Lookup(proxy.Host + "/tasks/hello:v1").Digest)
	for _, l := range m.Layers {
		if all[l.Digest.String()] != 1 {
			t.Fatalf("layer %s fetched %d times, want once (%v)", l.Digest, all[l.Digest.String()], all)
		}
	}
}

func TestRetryAfterForms(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{"3": 3 * time.Second, "": 0, "soon": 0,
		now.Add(5 * time.Second).Format(http.TimeFormat): 5 * time.Second} {
		if got := retryAfter(in, now); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", in, got, want)
		}
	}
	c := &Client{MaxWait: 4 * time.Second, Backoff: time.Second}
	if got := c.wait(3, 0); got != 4*time.Second {
		t.Errorf("third backoff %v, want 4s", got)
	}
	if got := c.wait(1, time.Hour); got != 4*time.Second {
		t.Errorf("a Retry-After past MaxWait waits %v, want 4s", got)
	}
}

func TestPullable(t *testing.T) {
	for ref, want := range map[string]bool{"localhost/harness-base:bookworm": false, "localhost:5000/x:1": true, "alexgshaw/regex-log:20251031": true, "::bad": false} {
		if got := Pullable(ref); got != want {
			t.Errorf("Pullable(%q) = %v, want %v", ref, got, want)
		}
	}
}

// A layer's download tells of its bytes as they come, every
// FetchingEvery bytes, between the events of the layers done, which stay
// as they were.
func TestPullTellsTheBytesOfALayerInFlight(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	noise := make([]byte, 3*FetchingEvery+FetchingEvery/2)
	var x uint64 = 88172645463325252
	for i := range noise {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		noise[i] = byte(x)
	}
	img := registrytest.Synthetic(t, v1.Config{}, map[string]string{"/etc/os-release": "ID=test\n"}, map[string]string{"/noise": string(noise)})
	ref, _ := reg.Push(t, "tasks/big:v1", img)
	c := newClient(t, reg)
	var events []Progress
	c.OnProgress = func(p Progress) { events = append(events, p) }
	if _, err := c.Pull(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	var done []Progress
	var fetching int
	var before int64
	for _, p := range events {
		if p.Bytes < before || p.Bytes > p.Total || p.Fetched != p.Bytes {
			t.Fatalf("event %+v after %d bytes: not counting up to the total", p, before)
		}
		before = p.Bytes
		if p.Fetching {
			fetching++
			if p.Layer != 2 {
				t.Errorf("bytes in flight of layer %d, want the big layer 2: %+v", p.Layer, p)
			}
			continue
		}
		done = append(done, p)
	}
	if fetching != 3 {
		t.Errorf("%d events of bytes in flight, want 3 for a layer of 3.5 MiB", fetching)
	}
	if len(done) != 3 || done[0].Layer != 0 || done[1].Layer != 1 || done[2].Layer != 2 || done[2].Bytes != done[2].Total {
		t.Errorf("layer events %+v, want the start and two layers done", done)
	}
}

// The environment of a child process of the test that pulls one
// reference into a store and exits (TestMain): another run.
const (
	childDir = "HARNESS_PULL_TEST_STORE"
	childRef = "HARNESS_PULL_TEST_REF"
)

func TestMain(m *testing.M) {
	if dir, ref := os.Getenv(childDir), os.Getenv(childRef); dir != "" && ref != "" {
		c := &Client{Store: &Store{Dir: dir}, Keychain: authn.NewMultiKeychain()}
		if _, err := c.Pull(context.Background(), ref); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Runs at once, in processes of their own, sharing a store: every blob
// of the image (its configuration and each layer) is fetched from the
// registry once, by one of them; the others wait on its lock and find it
// stored.
func TestProcessesSharingAStoreFetchEachBlobOnce(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	noise := make([]byte, 4<<20)
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	img := registrytest.Synthetic(t, v1.Config{WorkingDir: "/app"},
		map[string]string{"/etc/os-release": "ID=test\n"},
		map[string]string{"/app/noise.bin": string(noise)},
		map[string]string{"/app/data.txt": numbered("procs", 20000)})
	reg.Push(t, "tasks/shared:v1", img)
	proxy := registrytest.NewProxy(t, reg.Host)
	dir := t.TempDir()
	ref := proxy.Host + "/tasks/shared:v1"
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childDir+"="+dir, childRef+"="+ref)
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	for _, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("pull %d: %v\n%s", i, err, outs[i])
		}
	}
	s := &Store{Dir: dir}
	rec := s.Lookup(ref)
	if rec == nil {
		t.Fatal("no record of the pulled reference")
	}
	m, err := s.Manifest(rec.Digest)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{m.Config.Digest.String(): 1}
	for _, l := range m.Layers {
		want[l.Digest.String()] = 1
	}
	all, _ := proxy.BlobGets()
	if !reflect.DeepEqual(all, want) {
		t.Fatalf("blob GETs %v, want each of the configuration and the %d layers once: %v", all, len(m.Layers), want)
	}
}
