// Package registrytest runs a real image registry for tests (Debian's
// docker-registry package, the Distribution registry) on a free port,
// plain or with TLS and basic authentication, pushes images to it, and
// puts a proxy in front of it that injects faults (429s with Retry-After,
// connections cut mid-blob) and counts what it served.
package registrytest

import (
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"archive/tar"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/crypto/bcrypt"

	"harness/testkit/testagents"
)

// Binary is the registry's program, as Debian installs it.
const Binary = "docker-registry"

// Options say how the registry is served.
type Options struct {
	// TLS serves HTTPS with a certificate of a CA made for the test.
	TLS bool
	// User and Password, when set, are the one account of basic
	// authentication.
	User, Password string
}

// Registry is a running registry.
type Registry struct {
	// Host is its host:port.
	Host string
	// CAFile is the PEM file of the CA that signed its certificate (TLS).
	CAFile string
	// Transport trusts the CA.
	Transport *http.Transport
	opts      Options
}

// Require skips t (or, where the tests must run, fails it) when the
// registry program is missing; it returns its path.
func Require(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath(Binary)
	if err == nil {
		return p
	}
	msg := "docker-registry is not installed (Debian, Ubuntu: apt-get install docker-registry; scripts/test installs it)"
	if os.Getenv(testagents.RequireEnv) != "" {
		t.Fatalf("%s, and %s is set", msg, testagents.RequireEnv)
	}
	t.Skip(msg)
	return ""
}

// Start runs a registry until t ends.
func Start(t testing.TB, o Options) *Registry {
	t.Helper()
	bin := Require(t)
	dir := t.TempDir()
	port := freePort(t)
	r := &Registry{Host: fmt.Sprintf("127.0.0.1:%d", port), Transport: http.DefaultTransport.(*http.Transport).Clone(), opts: o}
	cfg := fmt.Sprintf("version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n", filepath.Join(dir, "data"), r.Host)
	if o.TLS {
		cert, key, ca := makeCerts(t, dir)
		r.CAFile = ca
		cfg += fmt.Sprintf("  tls:\n    certificate: %s\n    key: %s\n", cert, key)
		pool := x509.NewCertPool()
		b, _ := os.ReadFile(ca)
		pool.AppendCertsFromPEM(b)
		r.Transport.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	if o.User != "" {
		h, err := bcrypt.GenerateFromPassword([]byte(o.Password), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		pw := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(pw, []byte(o.User+":"+string(h)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg += fmt.Sprintf("auth:\n  htpasswd:\n    realm: test\n    path: %s\n", pw)
	}
	cfgFile := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, "serve", cfgFile)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	scheme := "http"
	if o.TLS {
		scheme = "https"
	}
	client := &http.Client{Transport: r.Transport, Timeout: 5 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := client.Get(scheme + "://" + r.Host + "/v2/")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the registry did not answer: %v\n%s", err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return r
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// makeCerts makes a CA and a certificate it signs for 127.0.0.1 and
// localhost; it returns the files of the certificate, its key and the CA.
func makeCerts(t testing.TB, dir string) (cert, key, ca string) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "harness test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(leafKey)
	write := func(n, typ string, der []byte) string {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("cert.pem", "CERTIFICATE", leafDER), write("key.pem", "EC PRIVATE KEY", keyDER), write("ca.pem", "CERTIFICATE", caDER)
}

// Push pushes img to the registry as repo:tag (repo without the host) and
// returns the full reference and the manifest digest the registry has.
func (r *Registry) Push(t testing.TB, repoTag string, img v1.Image) (string, string) {
	t.Helper()
	ref, err := name.ParseReference(r.Host + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	auth := authn.Anonymous
	if r.opts.User != "" {
		auth = &authn.Basic{Username: r.opts.User, Password: r.opts.Password}
	}
	if err := remote.Write(ref, img, remote.WithAuth(auth), remote.WithTransport(r.Transport)); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return ref.String(), d.String()
}

// Synthetic is a small image of one layer per map of files (path to
// content), with cfg's WORKDIR and ENV.
func Synthetic(t testing.TB, cfg v1.Config, layers ...map[string]string) v1.Image {
	t.Helper()
	img := empty.Image
	for _, files := range layers {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		dirs := map[string]bool{}
		for p, content := range files {
			for d := filepath.Dir(p); d != "." && d != "/" && !dirs[d]; d = filepath.Dir(d) {
				dirs[d] = true
				tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(d, "/") + "/", Typeflag: tar.TypeDir, Mode: 0o755})
			}
			tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(p, "/"), Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(content))})
			tw.Write([]byte(content))
		}
		tw.Close()
		raw := b.Bytes()
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil })
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			t.Fatal(err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = "linux", "amd64", cfg
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// FromTar is an image whose first layer is a root filesystem tar (the
// task base image's, say) and whose next layers are extra's, with cfg.
func FromTar(t testing.TB, file string, cfg v1.Config, extra ...map[string]string) v1.Image {
	t.Helper()
	base, err := TarLayer(file)
	if err != nil {
		t.Fatal(err)
	}
	return FromLayer(t, base, cfg, extra...)
}

// TarLayer is a root filesystem tar as a layer, compressed the fastest
// way (the base image's tar is a few hundred MB). Making it reads the
// tar twice, for its digests: a caller that pushes several images over
// one base makes it once.
func TarLayer(file string) (v1.Layer, error) {
	return tarball.LayerFromFile(file, tarball.WithCompressionLevel(gzip.BestSpeed))
}

// FromLayer is an image whose first layer is base and whose next layers
// are extra's, with cfg.
func FromLayer(t testing.TB, base v1.Layer, cfg v1.Config, extra ...map[string]string) v1.Image {
	t.Helper()
	top := Synthetic(t, cfg, extra...)
	img, err := mutate.AppendLayers(empty.Image, base)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := top.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if img, err = mutate.AppendLayers(img, ls...); err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = "linux", "amd64", cfg
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// BaseTar is the task base image's root filesystem tar that
// scripts/build-base-image caches, or "" when it is not there.
func BaseTar() string {
	dir := os.Getenv("XDG_CACHE_HOME")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache")
	}
	m, _ := filepath.Glob(filepath.Join(dir, "harness", "base", "harness-base-bookworm-*.tar"))
	if len(m) == 0 {
		return ""
	}
	return m[0]
}

// Proxy stands in front of a plain-HTTP registry, injecting faults and
// counting requests.
type Proxy struct {
	// Host is the proxy's host:port.
	Host string

	mu sync.Mutex
	// tooMany answers this many manifest requests 429 first.
	tooMany    int
	retryAfter string
	// cut cuts this many blob downloads after half their body.
	cut    int
	cutMin int64
	// blobGets counts full and ranged blob GETs per digest.
	blobGets map[string]int
	ranged   map[string]int
	// times holds when each manifest request came.
	manifestTimes []time.Time
	// requests counts every request.
	requests int
}

// NewProxy starts a proxy in front of the registry at host (plain HTTP)
// until t ends.
func NewProxy(t testing.TB, host string) *Proxy {
	t.Helper()
	p := &Proxy{blobGets: map[string]int{}, ranged: map[string]int{}}
	target, _ := url.Parse("http://" + host)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(resp *http.Response) error {
		if !strings.Contains(resp.Request.URL.Path, "/blobs/") || resp.Request.Method != http.MethodGet {
			return nil
		}
		p.mu.Lock()
		cut := p.cut > 0 && resp.StatusCode == http.StatusOK && resp.ContentLength >= p.cutMin && resp.ContentLength > 1
		if cut {
			p.cut--
		}
		p.mu.Unlock()
		if cut {
			half := resp.ContentLength / 2
			resp.Body = &cutBody{r: io.LimitReader(resp.Body, half), c: resp.Body}
		}
		return nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.Host = l.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		path := req.URL.Path
		p.mu.Lock()
		p.requests++
		if strings.Contains(path, "/manifests/") {
			p.manifestTimes = append(p.manifestTimes, time.Now())
			if p.tooMany > 0 {
				p.tooMany--
				p.mu.Unlock()
				w.Header().Set("Retry-After", p.retryAfter)
				http.Error(w, `{"errors":[{"code":"TOOMANYREQUESTS","message":"slow down"}]}`, http.StatusTooManyRequests)
				return
			}
		}
		if i := strings.Index(path, "/blobs/"); i >= 0 && req.Method == http.MethodGet {
			d := path[i+len("/blobs/"):]
			p.blobGets[d]++
			if req.Header.Get("Range") != "" {
				p.ranged[d]++
			}
		}
		p.mu.Unlock()
		rp.ServeHTTP(w, req)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return p
}

// cutBody ends a body early with an error, as a connection reset does.
type cutBody struct {
	r io.Reader
	c io.Closer
}

func (b *cutBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		return n, fmt.Errorf("connection cut by the test proxy")
	}
	return n, err
}

func (b *cutBody) Close() error { return b.c.Close() }

// TooMany answers the next n manifest requests 429 with Retry-After
// (seconds).
func (p *Proxy) TooMany(n int, retryAfter string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tooMany, p.retryAfter = n, retryAfter
}

// Cut cuts the next n full downloads of blobs of at least minBytes after
// half their body.
func (p *Proxy) Cut(n int, minBytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut, p.cutMin = n, minBytes
}

// BlobGets returns how many GETs each blob had, and how many of them
// were range requests.
func (p *Proxy) BlobGets() (all, ranged map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	all, ranged = map[string]int{}, map[string]int{}
	for k, v := range p.blobGets {
		all[k] = v
	}
	for k, v := range p.ranged {
		ranged[k] = v
	}
	return all, ranged
}

// Requests returns how many requests of any kind the proxy has had.
func (p *Proxy) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests
}

// ManifestTimes returns when each manifest request came.
func (p *Proxy) ManifestTimes() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time{}, p.manifestTimes...)
}

// PushIndex pushes a multi-platform index (and its images) as ref.
func (r *Registry) PushIndex(t testing.TB, ref string, idx v1.ImageIndex) {
	t.Helper()
	n, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	auth := authn.Anonymous
	if r.opts.User != "" {
		auth = &authn.Basic{Username: r.opts.User, Password: r.opts.Password}
	}
	if err := remote.WriteIndex(n, idx, remote.WithAuth(auth), remote.WithTransport(r.Transport)); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
}
