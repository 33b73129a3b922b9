package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// TestMain lets the test binary stand in for the harness binary as the
// init of commands run in layers.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == InitArg {
		os.Exit(Main(os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}

type entry struct {
	name, body, link string
	dir              bool
	mode             int64
}

func makeTar(t testing.TB, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: time.Unix(1700000000, 0)}
		switch {
		case e.dir:
			h.Typeflag, h.Name = tar.TypeDir, e.name+"/"
			if h.Mode == 0 {
				h.Mode = 0o755
			}
		case e.link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.link
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
			if h.Mode == 0 {
				h.Mode = 0o644
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	return buf.Bytes()
}

// baseEntries is a tiny root filesystem: no programs (the tests bind the
// host's shell in as the agent would be), just files to change.
var baseEntries = []entry{
	{name: "etc", dir: true},
	{name: "etc/passwd", body: "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
	{name: "etc/group", body: "root:x:0:\n"},
	{name: "usr", dir: true},
	{name: "usr/share", dir: true},
	{name: "usr/share/doc.txt", body: "image doc\n"},
	{name: "app", dir: true},
	{name: "app/hello.txt", body: "hello\n"},
	{name: "app/old.txt", body: "old\n"},
	{name: "tmp", dir: true, mode: 0o1777},
	{name: "root", dir: true, mode: 0o700},
}

func newStore(t *testing.T) *Store {
	return &Store{Dir: filepath.Join(t.TempDir(), "cache")}
}

func tarImage(t *testing.T, s *Store) *Image {
	t.Helper()
	tarFile := filepath.Join(t.TempDir(), "rootfs.tar")
	if err := os.WriteFile(tarFile, makeTar(t, baseEntries), 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := s.Resolve(context.Background(), tarFile)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// sh runs a shell script in the layer with the host's /bin/sh bound in.
func sh(t *testing.T, l *Layer, script string, mod func(*Run)) (string, int) {
	t.Helper()
	argv, binds, err := HostAgent([]string{"/bin/sh", "-c", script}, os.Environ(), l.Image)
	if err != nil {
		t.Fatal(err)
	}
	r := Run{Argv: argv, Env: l.Image.Env(), Binds: append(binds, hostTools(t, l.Image)...)}
	if mod != nil {
		mod(&r)
	}
	cmd, err := l.Command(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	cmd.Path, cmd.Args[0] = self, self
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}

// hostTools binds the host's coreutils and grep into the image, which has
// no programs of its own.
func hostTools(t *testing.T, img *Image) []Bind {
	t.Helper()
	var binds []Bind
	seen := map[string]bool{}
	for _, tool := range []string{"rm", "cat", "grep", "dirname", "mkdir", "id"} {
		_, bs, err := HostAgent([]string{tool}, os.Environ(), img)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			if !seen[b.Src+"\x00"+b.Dst] {
				seen[b.Src+"\x00"+b.Dst] = true
				binds = append(binds, b)
			}
		}
	}
	return binds
}

func newLayer(t *testing.T, img *Image) *Layer {
	t.Helper()
	l, err := NewLayer(img, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	l.Self = []string{self, InitArg}
	return l
}

func treeHash(t *testing.T, dir string) string {
	t.Helper()
	sum, err := ContextHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

func TestTarIsUnpackedOnceIntoTheCache(t *testing.T) {
	s := newStore(t)
	img := tarImage(t, s)
	if img.Kind != "tar" || !strings.HasPrefix(img.ID, "sha256:") {
		t.Fatalf("image = %+v", img)
	}
	b, err := os.ReadFile(filepath.Join(img.Rootfs, "app/hello.txt"))
	if err != nil || string(b) != "hello\n" {
		t.Fatalf("app/hello.txt = %q, %v", b, err)
	}
	fi, err := os.Stat(filepath.Join(img.Rootfs, "tmp"))
	if err != nil || fi.Mode().Perm() != 0o777 || fi.Mode()&os.ModeSticky == 0 {
		t.Fatalf("tmp mode = %v, %v", fi.Mode(), err)
	}
	// A second resolve reuses the entry: a marker left in it survives.
	marker := filepath.Join(filepath.Dir(img.Rootfs), "marker")
	os.WriteFile(marker, nil, 0o644)
	again := tarImage(t, s)
	if again.Rootfs != img.Rootfs {
		t.Fatalf("rootfs %s, then %s", img.Rootfs, again.Rootfs)
	}
	// The same content under another name is named as this run named it.
	if again.Ref == img.Ref || again.Kind != "tar" {
		t.Fatalf("the second tar (another path, the same bytes) is named %q (%s), as the first was", again.Ref, again.Kind)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("cache entry was remade")
	}
	entries := cacheFiles(t, s)
	if len(entries) != 1 {
		t.Fatalf("cache holds %d entries, want 1", len(entries))
	}
}

func TestLayerWritesNeverReachTheImageOrTheHost(t *testing.T) {
	s := newStore(t)
	img := tarImage(t, s)
	before := treeHash(t, img.Rootfs)
	hostMarker := "/usr/share/harness-layer-test-" + filepath.Base(t.TempDir())
	l := newLayer(t, img)
	script := `set -e
echo agent > ` + hostMarker + `
echo extra >> /etc/passwd
echo new > /usr/share/new.txt
rm /app/old.txt
echo changed > /app/hello.txt
mkdir -p /app/sub && echo f > /app/sub/f.txt
mkdir /app/empty
pwd`
	out, code := sh(t, l, script, nil)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if strings.TrimSpace(out) != "/" {
		t.Fatalf("working directory %q, want / (the image has no WORKDIR)", out)
	}
	if _, err := os.Stat(hostMarker); err == nil {
		os.Remove(hostMarker)
		t.Fatalf("a write to %s in the layer reached the host", hostMarker)
	}
	if after := treeHash(t, img.Rootfs); after != before {
		t.Fatal("the cached image changed")
	}
	changes, err := l.Changes()
	if err != nil {
		t.Fatal(err)
	}
	want := []Change{
		{"/app/empty", "added"},
		{"/app/hello.txt", "modified"},
		{"/app/old.txt", "deleted"},
		{"/app/sub/f.txt", "added"},
		{"/etc/passwd", "modified"},
		{hostMarker, "added"},
		{"/usr/share/new.txt", "added"},
	}
	// /tmp may hold the shell's files; the rest must be exact.
	var got []Change
	for _, c := range changes {
		if !strings.HasPrefix(c.Path, "/tmp/") {
			got = append(got, c)
		}
	}
	sortChanges(want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("changes:\n got %v\nwant %v", got, want)
	}
	// The next command in the same layer (the verifier) sees them.
	out, code = sh(t, l, "cat /usr/share/new.txt /app/hello.txt; test ! -e /app/old.txt", nil)
	if code != 0 || out != "new\nchanged\n" {
		t.Fatalf("second command: exit %d, %q", code, out)
	}
	if b, err := l.ReadFile("/app/hello.txt"); err != nil || string(b) != "changed\n" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}
	if _, err := l.ReadFile("/app/old.txt"); err == nil {
		t.Fatal("ReadFile of a deleted file succeeded")
	}
	if b, err := l.ReadFile("/usr/share/doc.txt"); err != nil || string(b) != "image doc\n" {
		t.Fatalf("ReadFile of an image file = %q, %v", b, err)
	}
	// Another trial's layer starts from the image.
	other := newLayer(t, img)
	out, code = sh(t, other, "cat /app/hello.txt; test ! -e /usr/share/new.txt && test -e /app/old.txt", nil)
	if code != 0 || out != "hello\n" {
		t.Fatalf("fresh layer: exit %d, %q", code, out)
	}
	if err := l.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(l.Dir); err == nil {
		t.Fatal("layer still on disk")
	}
}

func sortChanges(c []Change) {
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if c[j].Path < c[i].Path {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
}

func TestCommandExitStatusAndMountPointsStayOutOfTheChanges(t *testing.T) {
	img := tarImage(t, newStore(t))
	l := newLayer(t, img)
	out, code := sh(t, l, "test -c /dev/null && test -d /proc/self && exit 7", nil)
	if code != 7 {
		t.Fatalf("exit %d, want 7: %s", code, out)
	}
	changes, err := l.Changes()
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 0 {
		t.Fatalf("a command that wrote nothing left changes %v", changes)
	}
}

// ociLayout writes an OCI image layout of the given layers and config.
func ociLayout(t *testing.T, layers [][]byte, config string) string {
	t.Helper()
	dir := t.TempDir()
	blob := func(b []byte) string {
		sum := sha256.Sum256(b)
		h := hex.EncodeToString(sum[:])
		os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755)
		os.WriteFile(filepath.Join(dir, "blobs", "sha256", h), b, 0o644)
		return "sha256:" + h
	}
	var ls []map[string]any
	for _, l := range layers {
		ls = append(ls, map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": blob(l), "size": len(l)})
	}
	cfg := []byte(config)
	man, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"config":        map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": blob(cfg), "size": len(cfg)},
		"layers":        ls,
	})
	idx, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []map[string]any{{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": blob(man), "size": len(man)}}})
	os.WriteFile(filepath.Join(dir, "index.json"), idx, 0o644)
	os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
	return dir
}

func TestOCILayoutLayersWhiteoutsAndConfig(t *testing.T) {
	top := makeTar(t, []entry{
		{name: "app", dir: true},
		{name: "app/.wh.old.txt"},
		{name: "usr/share/.wh..wh..opq"},
		{name: "usr/share/mine.txt", body: "mine\n"},
		{name: "etc/motd", body: "hi\n"},
	})
	layout := ociLayout(t, [][]byte{makeTar(t, baseEntries), top},
		`{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/usr/bin:/bin","GREETING=hello there"],"WorkingDir":"/srv/app","User":"root"}}`)
	if Kind(layout) != "oci" {
		t.Fatalf("kind %q", Kind(layout))
	}
	img, err := newStore(t).Resolve(context.Background(), layout)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{"app/old.txt": false, "app/hello.txt": true, "usr/share/doc.txt": false, "usr/share/mine.txt": true, "etc/motd": true, "srv/app": true} {
		_, err := os.Stat(filepath.Join(img.Rootfs, p))
		if (err == nil) != want {
			t.Errorf("%s exists = %v, want %v", p, err == nil, want)
		}
	}
	if img.Workdir() != "/srv/app" || img.Config.User != "root" {
		t.Fatalf("config = %+v", img.Config)
	}
	l := newLayer(t, img)
	out, code := sh(t, l, `echo "$GREETING"; pwd; echo "$HOME"`, nil)
	if code != 0 || out != "hello there\n/srv/app\n/root\n" {
		t.Fatalf("exit %d, %q", code, out)
	}
}

func TestNoNetworkHasLoopbackOnly(t *testing.T) {
	img := tarImage(t, newStore(t))
	l := newLayer(t, img)
	out, code := sh(t, l, "cat /proc/net/dev", func(r *Run) { r.NoNetwork = true })
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	var ifaces []string
	for _, line := range strings.Split(out, "\n")[2:] {
		if name, _, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			ifaces = append(ifaces, name)
		}
	}
	if !reflect.DeepEqual(ifaces, []string{"lo"}) {
		t.Fatalf("interfaces %v, want [lo]", ifaces)
	}
}

func TestFuseOverlayfsFallback(t *testing.T) {
	if _, err := exec.LookPath("fuse-overlayfs"); err != nil {
		if os.Getenv("HARNESS_REQUIRE_AGENTS") != "" {
			t.Fatal("fuse-overlayfs is not installed")
		}
		t.Skip("fuse-overlayfs is not installed")
	}
	img := tarImage(t, newStore(t))
	before := treeHash(t, img.Rootfs)
	l := newLayer(t, img)
	l.Overlay = "fuse"
	out, code := sh(t, l, "echo x >> /etc/passwd && echo y > /app/new.txt && grep -c fuse /proc/mounts", nil)
	if code != 0 || strings.TrimSpace(out) == "0" {
		t.Fatalf("exit %d: %q", code, out)
	}
	if treeHash(t, img.Rootfs) != before {
		t.Fatal("the cached image changed")
	}
	b, err := l.ReadFile("/app/new.txt")
	if err != nil || string(b) != "y\n" {
		t.Fatalf("new file = %q, %v", b, err)
	}
}

func TestLookupUser(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "etc"), 0o755)
	os.WriteFile(filepath.Join(dir, "etc/passwd"), []byte("root:x:0:0::/root:/bin/sh\ndev:x:1000:1000::/home/dev:/bin/bash\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "etc/group"), []byte("root:x:0:\nstaff:x:50:\naudio:x:29:ann,dev\nvideo:x:44:dev\ndeveloper:x:60:devs\n"), 0o644)
	img := &Image{Rootfs: dir}
	for spec, want := range map[string]User{
		"":          {0, 0, "/root", nil},
		"dev":       {1000, 1000, "/home/dev", []int{29, 44}},
		"1000":      {1000, 1000, "/home/dev", []int{29, 44}},
		"dev:staff": {1000, 50, "/home/dev", []int{29, 44}},
		"4242:7":    {4242, 7, "/", nil},
	} {
		got, err := img.LookupUser(spec)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("LookupUser(%q) = %+v, %v; want %+v", spec, got, err, want)
		}
	}
	if _, err := img.LookupUser("ghost"); err == nil || !strings.Contains(err.Error(), "not in the image's /etc/passwd") {
		t.Errorf("unknown user: %v", err)
	}
}

func TestResolveInFollowsTheImagesSymlinks(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "usr/lib"), 0o755)
	os.Symlink("usr/lib", filepath.Join(dir, "lib"))
	os.Symlink("/usr/lib", filepath.Join(dir, "abs"))
	os.Symlink("../../../..", filepath.Join(dir, "usr/lib/up"))
	for in, want := range map[string]string{
		"/lib/x.so":       "/usr/lib/x.so",
		"/abs/y":          "/usr/lib/y",
		"/usr/lib/up/etc": "/etc",
		"/missing/a":      "/missing/a",
	} {
		if got := resolveIn(dir, in); got != want {
			t.Errorf("resolveIn(%s) = %s, want %s", in, got, want)
		}
	}
}

// cacheFiles are the names in the cache's directory but its bookkeeping
// (the entries' locks and notes).
func cacheFiles(t *testing.T, s *Store) []string {
	t.Helper()
	des, err := os.ReadDir(s.Dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		if de.Name() != stateDir {
			out = append(out, de.Name())
		}
	}
	return out
}

func TestResolveErrors(t *testing.T) {
	s := newStore(t)
	empty := t.TempDir()
	if _, err := s.Resolve(context.Background(), empty); err == nil || !strings.Contains(err.Error(), "neither a root filesystem") {
		t.Errorf("empty dir: %v", err)
	}
	notTar := filepath.Join(t.TempDir(), "x.tar")
	os.WriteFile(notTar, []byte("this is not a tar archive, not at all, it is text of some length"), 0o644)
	if _, err := s.Resolve(context.Background(), notTar); err == nil || !strings.Contains(err.Error(), notTar) {
		t.Errorf("bad tar: %v", err)
	}
	if entries := cacheFiles(t, s); len(entries) != 0 {
		t.Errorf("a failed unpack left %d cache entries", len(entries))
	}
}

func TestGlibcTooOldIsNamed(t *testing.T) {
	dir := t.TempDir()
	libc := "/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err != nil {
		t.Skip("no x86_64 glibc on this host")
	}
	os.MkdirAll(filepath.Join(dir, "lib/x86_64-linux-gnu"), 0o755)
	os.MkdirAll(filepath.Join(dir, "lib64"), 0o755)
	b, _ := os.ReadFile(libc)
	os.WriteFile(filepath.Join(dir, libc), b, 0o755)
	os.WriteFile(filepath.Join(dir, "lib64/ld-linux-x86-64.so.2"), nil, 0o755)
	img := &Image{Rootfs: dir}
	have := imageGlibc(img)
	if !strings.HasPrefix(have, "GLIBC_2.") {
		t.Fatalf("image glibc %q", have)
	}
	h := &hostAgent{img: img, usesGlibc: true, interpPath: "/lib64/ld-linux-x86-64.so.2", glibcNeed: "GLIBC_2.999", needer: "/opt/agent"}
	err := h.checkGlibc()
	if err == nil || !strings.Contains(err.Error(), "needs GLIBC_2.999 but the image's glibc is "+have) || !strings.Contains(err.Error(), "run the image's own copy") {
		t.Fatalf("err = %v", err)
	}
	h.glibcNeed = have
	if err := h.checkGlibc(); err != nil {
		t.Fatal(err)
	}
}

func TestHostAgentBindsAScriptAndItsInterpreter(t *testing.T) {
	img := tarImage(t, newStore(t))
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "pkg", "lib"), 0o755)
	os.MkdirAll(filepath.Join(dir, "node_modules"), 0o755)
	script := filepath.Join(dir, "pkg", "agent")
	os.WriteFile(script, []byte("#!/usr/bin/env sh\n. \"$(dirname \"$0\")/lib/part.sh\"\necho \"agent ran: $PART $1\"\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "pkg", "lib", "part.sh"), []byte("PART=loaded\n"), 0o644)
	argv, binds, err := HostAgent([]string{script, "arg"}, os.Environ(), img)
	if err != nil {
		t.Fatal(err)
	}
	shPath, _ := exec.LookPath("sh")
	shPath, _ = filepath.Abs(shPath)
	if argv[0] != shPath || argv[1] != script || argv[2] != "arg" {
		t.Fatalf("argv = %v", argv)
	}
	var srcs []string
	for _, b := range binds {
		srcs = append(srcs, b.Src)
	}
	joined := strings.Join(srcs, " ")
	for _, want := range []string{filepath.Join(dir, "pkg"), filepath.Join(dir, "node_modules")} {
		if !strings.Contains(joined, want) {
			t.Errorf("binds %v lack %s", srcs, want)
		}
	}
	l := newLayer(t, img)
	cmd, err := l.Command(context.Background(), Run{Argv: argv, Env: img.Env(), Binds: append(binds, hostTools(t, img)...)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "agent ran: loaded arg\n" {
		t.Fatalf("%v: %s", err, out)
	}
	// The agent's files are read-only inside.
	out2, code := sh(t, l, "echo x > "+filepath.Join(dir, "pkg", "agent")+" 2>/dev/null && echo wrote", func(r *Run) { r.Binds = append(r.Binds, Bind{Src: filepath.Join(dir, "pkg")}) })
	if code == 0 || strings.Contains(out2, "wrote") {
		t.Fatalf("wrote to a read-only bind: %q", out2)
	}
	if changes, _ := l.Changes(); len(changes) != 0 {
		t.Fatalf("binds left changes %v", changes)
	}
}

func TestCompressedTarsAreUnpacked(t *testing.T) {
	raw := makeTar(t, baseEntries)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	var zs bytes.Buffer
	enc, _ := zstd.NewWriter(&zs)
	enc.Write(raw)
	enc.Close()
	s := newStore(t)
	for name, body := range map[string][]byte{"rootfs.tar.gz": gz.Bytes(), "rootfs.tar.zst": zs.Bytes()} {
		p := filepath.Join(t.TempDir(), name)
		os.WriteFile(p, body, 0o644)
		img, err := s.Resolve(context.Background(), p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b, err := os.ReadFile(filepath.Join(img.Rootfs, "app/hello.txt")); err != nil || string(b) != "hello\n" {
			t.Fatalf("%s: app/hello.txt = %q, %v", name, b, err)
		}
	}
}

func TestImageUserKeepsItsIDsAsRoot(t *testing.T) {
	entries := append(append([]entry{}, baseEntries...), entry{name: "home", dir: true}, entry{name: "home/dev", dir: true})
	entries[1] = entry{name: "etc/passwd", body: "root:x:0:0:root:/root:/bin/sh\ndev:x:1000:1000::/home/dev:/bin/sh\n"}
	entries[2] = entry{name: "etc/group", body: "root:x:0:\naudio:x:29:dev\n"}
	layout := ociLayout(t, [][]byte{makeTar(t, entries)}, `{"config":{"User":"dev","WorkingDir":"/home/dev"}}`)
	img, err := newStore(t).Resolve(context.Background(), layout)
	if err != nil {
		t.Fatal(err)
	}
	l := newLayer(t, img)
	if os.Geteuid() != 0 {
		_, err := l.Command(context.Background(), Run{Argv: []string{"true"}})
		if err == nil || !strings.Contains(err.Error(), `image user "dev" (uid 1000): only root maps to the invoking user without privileges`) {
			t.Fatalf("err = %v", err)
		}
		return
	}
	// Its groups are its own (the image's /etc/group), none of the
	// harness's.
	out, code := sh(t, l, `echo "$(id -u):$(id -g) $(id -G) $HOME"; echo x > /home/dev/mine`, nil)
	if code != 0 || out != "1000:1000 1000 29 /home/dev\n" {
		t.Fatalf("exit %d: %q", code, out)
	}
	fi, err := os.Stat(filepath.Join(l.Upper(), "home/dev/mine"))
	if err != nil || fi.Sys().(*syscall.Stat_t).Uid != 1000 {
		t.Fatalf("the file is not the image user's: %v", err)
	}
}

func TestMuslProgramNeedsMuslInTheImage(t *testing.T) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true on this host")
	}
	b, err := os.ReadFile(truePath)
	if err != nil {
		t.Fatal(err)
	}
	glibc := []byte("/lib64/ld-linux-x86-64.so.2\x00")
	i := bytes.Index(b, glibc)
	if i < 0 {
		t.Skip("the host's true is not an x86_64 glibc program")
	}
	musl := []byte("/lib/ld-musl-x86_64.so.1\x00")
	copy(b[i:], append(musl, make([]byte, len(glibc)-len(musl))...))
	prog := filepath.Join(t.TempDir(), "musl-agent")
	os.WriteFile(prog, b, 0o755)
	img := tarImage(t, newStore(t))
	_, _, err = HostAgent([]string{prog}, os.Environ(), img)
	if err == nil || !strings.Contains(err.Error(), "is a musl program and the image has no musl (/lib/ld-musl-x86_64.so.1): install the agent in the image") {
		t.Fatalf("err = %v", err)
	}
}

func TestArgvRunsWithoutSysProcAttr(t *testing.T) {
	img := tarImage(t, newStore(t))
	l := newLayer(t, img)
	argv, binds, err := HostAgent([]string{"/bin/sh", "-c", "echo inside > /app/argv.txt; exit 4"}, os.Environ(), img)
	if err != nil {
		t.Fatal(err)
	}
	line, err := l.Argv(context.Background(), Run{Argv: argv, Env: img.Env(), Binds: binds})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(line[0], line[1:]...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 4 {
		t.Fatalf("%v: %s", err, out)
	}
	if b, err := l.ReadFile("/app/argv.txt"); err != nil || string(b) != "inside\n" {
		t.Fatalf("%q %v", b, err)
	}
}

func TestReleasedLayerIsRemovableWithoutPrivileges(t *testing.T) {
	img := tarImage(t, newStore(t))
	l := newLayer(t, img)
	l.Overlay = "kernel"
	if out, code := sh(t, l, "mkdir -p /app/new && echo x > /app/new/f", nil); code != 0 {
		t.Skipf("kernel overlayfs refused here: %s", out)
	}
	locked := func() []string {
		var out []string
		filepath.WalkDir(filepath.Join(l.Dir, "work"), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				if fi, err := d.Info(); err == nil && fi.Mode().Perm()&0o700 != 0o700 {
					out = append(out, p)
				}
			}
			return nil
		})
		return out
	}
	// overlayfs leaves its work directory with mode 000: rm -rf as the
	// layer's owner (not root) could not list it.
	if len(locked()) == 0 {
		t.Fatal("no directory of the layer's work directory lacks its owner's permissions: the test shows nothing")
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if left := locked(); len(left) > 0 {
		t.Fatalf("still without their owner's permissions: %v", left)
	}
	if b, err := os.ReadFile(filepath.Join(l.Upper(), "app/new/f")); err != nil || string(b) != "x\n" {
		t.Fatalf("the layer's changes: %q, %v", b, err)
	}
}
