package image

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"harness/image/pull"
	"harness/testkit/registrytest"
)

// randomLayers writes n layer tars of mb MB of random (incompressible)
// files, 1 MB each, and returns an image of them.
func randomLayers(b *testing.B, dir string, n, mb int) v1.Image {
	b.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	body := make([]byte, 1<<20)
	img := empty.Image
	for l := range n {
		p := filepath.Join(dir, fmt.Sprintf("layer%d.tar", l))
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriterSize(f, 1<<20)
		tw := tar.NewWriter(w)
		if l == 0 {
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "etc/", Mode: 0o755})
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/passwd", Mode: 0o644, Size: 30})
			tw.Write([]byte("root:x:0:0:root:/root:/bin/sh\n"))
		}
		dn := fmt.Sprintf("data%d", l)
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dn + "/", Mode: 0o755})
		for i := range mb {
			for j := 0; j < len(body); j += 8 {
				v := rng.Uint64()
				for k := range 8 {
					body[j+k] = byte(v >> (8 * k))
				}
			}
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprintf("%s/f%03d", dn, i), Mode: 0o644, Size: int64(len(body))})
			tw.Write(body)
		}
		if err := tw.Close(); err != nil {
			b.Fatal(err)
		}
		w.Flush()
		f.Close()
		layer, err := tarball.LayerFromFile(p, tarball.WithCompressionLevel(gzip.BestSpeed))
		if err != nil {
			b.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			b.Fatal(err)
		}
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	img, err := mutate.ConfigFile(img, cf)
	if err != nil {
		b.Fatal(err)
	}
	return img
}

func benchPullStore(dir string, reg *registrytest.Registry) *Store {
	return &Store{Dir: dir, Podman: "/nonexistent/podman", Registry: &pull.Client{Transport: reg.Transport, Keychain: authn.NewMultiKeychain()}}
}

// pullBenchMB is the size of BenchmarkPull's image in MB: 200, or
// HARNESS_BENCH_PULL_MB (a multiple of 4: the image has four layers).
func pullBenchMB(b *testing.B) int {
	v := os.Getenv("HARNESS_BENCH_PULL_MB")
	if v == "" {
		return 200
	}
	mb, err := strconv.Atoi(v)
	if err != nil || mb < 4 || mb%4 != 0 {
		b.Fatalf("HARNESS_BENCH_PULL_MB=%q: want a multiple of 4 MB", v)
	}
	return mb
}

// BenchmarkPull pulls and unpacks an image of 200 MB of random layers
// (four of 50 MB: incompressible, so 200 MB on the wire; another size
// with HARNESS_BENCH_PULL_MB) from a registry on this machine: the first
// time (fetch and unpack), with the blobs already stored (unpack only,
// nothing fetched) and with the image already unpacked (nothing fetched
// or unpacked).
func BenchmarkPull(b *testing.B) {
	mb := pullBenchMB(b)
	reg := registrytest.Start(b, registrytest.Options{})
	dir := b.TempDir()
	ref, digest := reg.Push(b, "bench/big:v1", randomLayers(b, dir, 4, mb/4))
	b.Run("first", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			s := benchPullStore(filepath.Join(dir, fmt.Sprintf("first%d", i)), reg)
			img, err := s.Resolve(context.Background(), ref)
			if err != nil || img.Digest != digest {
				b.Fatalf("%+v, %v", img, err)
			}
			b.StopTimer()
			s.Release()
			removeTree(s.Dir)
			b.StartTimer()
		}
		b.SetBytes(int64(mb) << 20)
	})
	stored := benchPullStore(filepath.Join(dir, "stored"), reg)
	if _, err := stored.Resolve(context.Background(), ref); err != nil {
		b.Fatal(err)
	}
	stored.Release()
	b.Run("blobs-stored", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			// The unpacked tree goes; the pulled blobs stay.
			entries, err := stored.Entries()
			if err != nil || len(entries) != 1 || !stored.remove(entries[0].Key) {
				b.Fatalf("the unpacked tree was not removed: %+v, %v", entries, err)
			}
			b.StartTimer()
			img, err := stored.Resolve(context.Background(), ref)
			if err != nil || img.Digest != digest {
				b.Fatalf("%+v, %v", img, err)
			}
			stored.Release()
		}
		b.SetBytes(int64(mb) << 20)
	})
	b.Run("unpacked", func(b *testing.B) {
		for b.Loop() {
			img, err := stored.Resolve(context.Background(), ref)
			if err != nil || img.Digest != digest {
				b.Fatalf("%+v, %v", img, err)
			}
		}
		stored.Release()
	})
}

// BenchmarkTrialStart compares a trial's start (its layer made, true run
// in it, the layer removed) on the task base image pulled from a registry
// and on the same image built from a Dockerfile by podman.
func BenchmarkTrialStart(b *testing.B) {
	tarFile := registrytest.BaseTar()
	if tarFile == "" || !podmanBase() {
		b.Skip("needs podman and the task base image (scripts/build-base-image)")
	}
	reg := registrytest.Start(b, registrytest.Options{})
	ref, _ := reg.Push(b, "bench/base:v1", registrytest.FromTar(b, tarFile, v1.Config{WorkingDir: "/app", Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}))
	dir := b.TempDir()
	s := benchPullStore(filepath.Join(dir, "cache"), reg)
	s.Podman = ""
	defer s.Release()
	pulled, err := s.Resolve(context.Background(), ref)
	if err != nil {
		b.Fatal(err)
	}
	ctxDir := filepath.Join(dir, "ctx")
	os.MkdirAll(ctxDir, 0o755)
	os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte("FROM localhost/harness-base:bookworm\nWORKDIR /app\n"), 0o644)
	built, err := s.Resolve(context.Background(), ctxDir)
	if err != nil {
		b.Fatal(err)
	}
	if pulled.Source != SourcePulled || built.Source != SourceBuilt {
		b.Fatalf("sources %s and %s", pulled.Source, built.Source)
	}
	self, _ := os.Executable()
	for _, c := range []struct {
		name string
		img  *Image
	}{{"pulled", pulled}, {"built", built}} {
		b.Run(c.name, func(b *testing.B) {
			argv, binds, err := HostAgent([]string{"true"}, os.Environ(), c.img)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				l, err := NewLayer(c.img, dir)
				if err != nil {
					b.Fatal(err)
				}
				l.Self = []string{self, InitArg}
				cmd, err := l.Command(context.Background(), Run{Argv: argv, Env: c.img.Env(), Binds: binds})
				if err != nil {
					b.Fatal(err)
				}
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
				if err := l.Remove(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// podmanBase says whether podman has the task base image.
func podmanBase() bool {
	return exec.Command("podman", "image", "exists", "localhost/harness-base:bookworm").Run() == nil
}
