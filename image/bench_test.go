package image

import (
	"archive/tar"
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"harness/internal/treecopy"
)

// benchImageTar writes a root filesystem tar of about 300 MB shaped like
// a Debian image: 15,000 files of 20 KB in 300 directories.
func benchImageTar(b *testing.B, dir string) string {
	b.Helper()
	p := filepath.Join(dir, "rootfs.tar")
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	tw := tar.NewWriter(w)
	rng := rand.New(rand.NewPCG(1, 2))
	body := make([]byte, 20<<10)
	mt := time.Unix(1700000000, 0)
	for _, d := range []string{"etc", "usr", "usr/lib", "tmp", "root", "app"} {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: mt})
	}
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/passwd", Mode: 0o644, Size: 32, ModTime: mt})
	tw.Write([]byte("root:x:0:0:root:/root:/bin/sh\n\n\n"))
	for d := 0; d < 300; d++ {
		dn := fmt.Sprintf("usr/lib/pkg%03d", d)
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dn + "/", Mode: 0o755, ModTime: mt})
		for i := 0; i < 50; i++ {
			for j := range body {
				body[j] = byte(rng.Uint32())
			}
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprintf("%s/f%02d.so", dn, i), Mode: 0o644, Size: int64(len(body)), ModTime: mt})
			tw.Write(body)
		}
	}
	if err := tw.Close(); err != nil {
		b.Fatal(err)
	}
	w.Flush()
	f.Close()
	return p
}

// BenchmarkTrialEnvironment compares, on a 300 MB image, the one-time
// unpack of the image into the cache, copying its root filesystem (what a
// trial would cost without layers), and a trial's layer: made, a command
// run in it (namespaces, overlay, /dev, /proc, pivot, exec of true) and
// removed.
func BenchmarkTrialEnvironment(b *testing.B) {
	dir := b.TempDir()
	tarFile := benchImageTar(b, dir)
	s := &Store{Dir: filepath.Join(dir, "cache")}
	img, err := s.Resolve(context.Background(), tarFile)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("unpack-once", func(b *testing.B) {
		if testing.Short() {
			b.Skip("-short")
		}
		for i := 0; b.Loop(); i++ {
			out := filepath.Join(dir, fmt.Sprintf("unpack%d", i))
			if err := unpackTar(tarFile, out); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			os.RemoveAll(out)
			b.StartTimer()
		}
	})
	b.Run("copy-rootfs", func(b *testing.B) {
		if testing.Short() {
			b.Skip("-short")
		}
		for i := 0; b.Loop(); i++ {
			out := filepath.Join(dir, fmt.Sprintf("copy%d", i))
			// A copy that keeps what a root filesystem needs: exact
			// modes (setuid too) and owners.
			opts := treecopy.Options{ExactModes: true, RootMode: true, Owners: true}
			if err := treecopy.Copy(img.Rootfs, out, opts); err != nil {
				b.Fatal(err)
			}
			if err := os.RemoveAll(out); err != nil {
				b.Fatal(err)
			}
		}
	})
	argv, binds, err := HostAgent([]string{"true"}, os.Environ(), img)
	if err != nil {
		b.Fatal(err)
	}
	self, _ := os.Executable()
	for _, overlay := range []string{"kernel", "fuse"} {
		b.Run("layer-"+overlay, func(b *testing.B) {
			if overlay == "fuse" {
				if _, err := os.Stat("/usr/bin/fuse-overlayfs"); err != nil {
					b.Skip("fuse-overlayfs is not installed")
				}
			}
			for b.Loop() {
				l, err := NewLayer(img, dir)
				if err != nil {
					b.Fatal(err)
				}
				l.Self, l.Overlay = []string{self, InitArg}, overlay
				cmd, err := l.Command(context.Background(), Run{Argv: argv, Env: img.Env(), Binds: binds})
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
