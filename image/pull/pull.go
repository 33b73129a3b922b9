package pull

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Kind says why a pull failed.
type Kind int

const (
	// Unavailable: the registry could not be reached or kept failing.
	Unavailable Kind = iota
	// NotFound: the registry has no such repository, tag or digest.
	NotFound
	// Unauthorized: the registry refused the credentials, or wants some
	// and none are stored.
	Unauthorized
	// Invalid: the reference is not one, or what the registry sent is
	// not an image.
	Invalid
)

// Error is a failed pull. Its message does not repeat the reference.
type Error struct {
	// Ref is the reference that was pulled.
	Ref string
	// Registry is its registry's host.
	Registry string
	// Kind says why it failed.
	Kind Kind
	// Anonymous says no credentials were stored for the registry.
	Anonymous bool
	// Err is the underlying error.
	Err error
}

func (e *Error) Error() string {
	switch e.Kind {
	case NotFound:
		return fmt.Sprintf("not found in registry %s: %v", e.Registry, e.Err)
	case Unauthorized:
		if e.Anonymous {
			return fmt.Sprintf("registry %s wants credentials and none are stored for it (docker login or podman login first): %v", e.Registry, e.Err)
		}
		return fmt.Sprintf("registry %s refused the stored credentials (wrong user name or password, or no access to the repository): %v", e.Registry, e.Err)
	case Invalid:
		return e.Err.Error()
	}
	return fmt.Sprintf("registry %s cannot be reached: %v", e.Registry, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Progress is one step of a pull.
type Progress struct {
	// Ref is the reference being pulled.
	Ref string
	// Digest is the image's manifest digest, once resolved.
	Digest string
	// Layer is the layer that finished (1-based); 0 for the event that
	// starts the layers.
	Layer int
	// Layers is the number of layers.
	Layers int
	// Bytes is the bytes of the layers done so far (fetched or found
	// stored), and Total of all of them.
	Bytes, Total int64
	// Fetched is the bytes fetched from the registry so far.
	Fetched int64
	// Stored says the finished layer was already in the store.
	Stored bool
	// Fetching says the event is of a layer's download in flight, not of
	// a layer done: Layer is the layer being fetched, and Bytes and
	// Fetched count the part of it fetched so far. Such events come as
	// the bytes do, one every FetchingEvery bytes at most.
	Fetching bool
}

// FetchingEvery is how many bytes of a layer come between two events of
// its download in flight.
const FetchingEvery = 1 << 20

// Client pulls images into a Store.
type Client struct {
	// Store is where blobs go.
	Store *Store
	// Keychain finds credentials (nil = the Docker and podman auth files
	// and credential helpers).
	Keychain authn.Keychain
	// Transport is the HTTP transport under authentication and retries
	// (nil = http.DefaultTransport).
	Transport http.RoundTripper
	// Platform is the platform picked from a multi-platform index (zero =
	// linux and the host's architecture).
	Platform v1.Platform
	// Attempts bounds the tries of a request that keeps failing for a
	// reason that may pass (0 = 6).
	Attempts int
	// MaxWait is the longest wait between tries, Retry-After included
	// (0 = one minute).
	MaxWait time.Duration
	// Backoff is the first wait between tries without a Retry-After,
	// doubled each time (0 = one second).
	Backoff time.Duration
	// OnProgress, when set, is told of each layer done, and of the
	// layers' downloads as they go (Progress.Fetching).
	OnProgress func(Progress)
	// OnRetry, when set, is told of each wait before a retry.
	OnRetry func(ref string, wait time.Duration, why string)
}

func (c *Client) keychain() authn.Keychain {
	if c.Keychain != nil {
		return c.Keychain
	}
	return authn.DefaultKeychain
}

func (c *Client) platform() v1.Platform {
	if c.Platform.OS != "" {
		return c.Platform
	}
	return v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
}

// retrying is the innermost transport: it tries again a request answered
// 429 or 502 to 504, or whose connection failed, waiting what a
// Retry-After says (else backing off).
func (c *Client) retrying(ref string) http.RoundTripper {
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	return &retryTransport{c: c, ref: ref, base: base}
}

type retryTransport struct {
	c    *Client
	ref  string
	base http.RoundTripper
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	attempts := t.c.Attempts
	if attempts <= 0 {
		attempts = 6
	}
	for try := 1; ; try++ {
		if try > 1 && req.Body != nil && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req.Body = body
		}
		resp, err := t.base.RoundTrip(req)
		canRetry := try < attempts && (req.Body == nil || req.GetBody != nil)
		var why string
		var after time.Duration
		switch {
		case err != nil:
			if !canRetry || req.Context().Err() != nil || !transient(err) {
				return resp, err
			}
			why = err.Error()
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusBadGateway ||
			resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout:
			if !canRetry {
				return resp, nil
			}
			why = resp.Status
			after = retryAfter(resp.Header.Get("Retry-After"), time.Now())
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
		default:
			return resp, nil
		}
		wait := t.c.wait(try, after)
		if t.c.OnRetry != nil {
			t.c.OnRetry(t.ref, wait, why)
		}
		if err := sleep(req.Context(), wait); err != nil {
			return nil, err
		}
	}
}

// wait is the wait before try+1: the server's Retry-After when it gave
// one, else the backoff doubled each try; never above MaxWait.
func (c *Client) wait(try int, after time.Duration) time.Duration {
	maxWait := c.MaxWait
	if maxWait <= 0 {
		maxWait = time.Minute
	}
	d := after
	if d <= 0 {
		d = c.Backoff
		if d <= 0 {
			d = time.Second
		}
		for i := 1; i < try && d < maxWait; i++ {
			d *= 2
		}
	}
	return min(d, maxWait)
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// transient says whether a request's error may pass on another try: a
// connection refused, reset or cut short, a timeout.
func transient(err error) bool {
	var ne net.Error
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE) ||
		errors.As(err, &ne) && ne.Timeout()
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Pullable says whether ref names an image in a registry: a reference
// whose registry is podman's "localhost" (without a port) names an image
// of podman's local storage, which no registry serves.
func Pullable(ref string) bool {
	r, err := name.ParseReference(ref)
	return err == nil && r.Context().RegistryStr() != "localhost"
}

// Resolve returns the digest ref names now (a tag asked of its registry;
// a digest as it is) without fetching the image.
func (c *Client) Resolve(ctx context.Context, ref string) (string, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", &Error{Ref: ref, Kind: Invalid, Err: err}
	}
	if d, ok := r.(name.Digest); ok {
		return d.DigestStr(), nil
	}
	desc, err := remote.Head(r, c.options(ctx, ref)...)
	if err != nil {
		return "", c.classify(ctx, ref, r, err)
	}
	return desc.Digest.String(), nil
}

func (c *Client) options(ctx context.Context, ref string) []remote.Option {
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(c.keychain()),
		remote.WithTransport(c.retrying(ref)),
		remote.WithPlatform(c.platform()),
		// Retries are the retrying transport's, which honours
		// Retry-After.
		remote.WithRetryBackoff(remote.Backoff{Steps: 1}),
		remote.WithUserAgent("harness"),
	}
}

// classify makes err a pull Error of its kind.
func (c *Client) classify(ctx context.Context, ref string, r name.Reference, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var pe *Error
	if errors.As(err, &pe) {
		return err
	}
	e := &Error{Ref: ref, Registry: r.Context().RegistryStr(), Kind: Unavailable, Err: err}
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			e.Kind = Unauthorized
		case http.StatusNotFound:
			e.Kind = NotFound
		}
		for _, d := range te.Errors {
			switch d.Code {
			case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode:
				e.Kind = NotFound
			case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
				e.Kind = Unauthorized
			}
		}
	}
	if e.Kind == Unauthorized {
		auth, aerr := authn.Resolve(ctx, c.keychain(), r.Context())
		e.Anonymous = aerr == nil && auth == authn.Anonymous
	}
	return e
}

// Pull resolves ref (a tag to a digest, an index to its platform's
// manifest) and fetches whatever of the image the store lacks. The
// store's record of ref is then what it resolved to.
func (c *Client) Pull(ctx context.Context, ref string) (*Record, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, &Error{Ref: ref, Kind: Invalid, Err: fmt.Errorf("not an image reference: %w", err)}
	}
	rec, err := c.pull(ctx, ref, r)
	if err != nil {
		return nil, c.classify(ctx, ref, r, err)
	}
	return rec, nil
}

func (c *Client) pull(ctx context.Context, ref string, r name.Reference) (*Record, error) {
	if err := c.Store.init(); err != nil {
		return nil, err
	}
	opts := c.options(ctx, ref)
	desc, err := remote.Get(r, opts...)
	if err != nil {
		return nil, err
	}
	rec := &Record{Ref: ref, Name: r.Name(), Pulled: time.Now().UTC()}
	var img v1.Image
	if desc.MediaType.IsIndex() {
		rec.IndexDigest = desc.Digest.String()
		if err := c.Store.putBlob(rec.IndexDigest, desc.Manifest); err != nil {
			return nil, err
		}
	}
	img, err = desc.Image()
	if err != nil {
		return nil, fmt.Errorf("image for %s: %w", c.platform(), err)
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	rec.Digest = digest.String()
	raw, err := img.RawManifest()
	if err != nil {
		return nil, err
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	rec.Layers, rec.Size = len(m.Layers), manifestSize(m)
	// The configuration is a blob like the layers: fetched once, under
	// its lock, by whichever pull (of this run or another) comes first.
	var rt http.RoundTripper
	blobs := func() (http.RoundTripper, error) {
		if rt == nil {
			auth, err := authn.Resolve(ctx, c.keychain(), r.Context())
			if err != nil {
				return nil, fmt.Errorf("credentials for %s: %w", r.Context().RegistryStr(), err)
			}
			if rt, err = transport.NewWithContext(ctx, r.Context().Registry, auth, c.retrying(ref), []string{r.Context().Scope(transport.PullScope)}); err != nil {
				return nil, err
			}
		}
		return rt, nil
	}
	if !c.Store.Has(m.Config.Digest.String()) {
		t, err := blobs()
		if err != nil {
			return nil, err
		}
		if _, err := c.fetchBlob(ctx, t, r.Context(), m.Config, nil); err != nil {
			return nil, fmt.Errorf("configuration %s: %w", m.Config.Digest, err)
		}
	}
	if cf, err := c.Store.config(m.Config.Digest.String()); err == nil {
		rec.Platform = cf.OS + "/" + cf.Architecture
	}
	if err := c.fetchLayers(ctx, ref, r.Context(), rec, m, blobs); err != nil {
		return nil, err
	}
	// The manifest last: a stored manifest means its blobs are there.
	if err := c.Store.putBlob(rec.Digest, raw); err != nil {
		return nil, err
	}
	if err := c.Store.Put(rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// fetchLayers fetches the layers the store lacks, telling OnProgress of
// each.
func (c *Client) fetchLayers(ctx context.Context, ref string, repo name.Repository, rec *Record, m *v1.Manifest, blobs func() (http.RoundTripper, error)) error {
	var total int64
	for _, l := range m.Layers {
		total += l.Size
	}
	p := Progress{Ref: ref, Digest: rec.Digest, Layers: len(m.Layers), Total: total}
	tell := func() {
		if c.OnProgress != nil {
			c.OnProgress(p)
		}
	}
	tell()
	for i, l := range m.Layers {
		d := l.Digest.String()
		p.Layer, p.Stored = i+1, c.Store.Has(d)
		if !p.Stored {
			rt, err := blobs()
			if err != nil {
				return err
			}
			var during func(int64)
			if c.OnProgress != nil {
				during = func(n int64) {
					q := p
					q.Fetching, q.Bytes, q.Fetched = true, p.Bytes+n, p.Fetched+n
					c.OnProgress(q)
				}
			}
			n, err := c.fetchBlob(ctx, rt, repo, l, during)
			p.Fetched += n
			if err != nil {
				return fmt.Errorf("layer %d of %d (%s): %w", i+1, len(m.Layers), d, err)
			}
		}
		p.Bytes += l.Size
		tell()
	}
	return nil
}

// fetchBlob downloads one blob into the store under its lock (another
// pull of it is waited for, then found done), resuming a partial
// download, whether this call's or an earlier run's, with a range
// request. It returns the bytes fetched; during, when set, is told of the
// bytes fetched so far every FetchingEvery bytes.
func (c *Client) fetchBlob(ctx context.Context, rt http.RoundTripper, repo name.Repository, l v1.Descriptor, during func(int64)) (int64, error) {
	digest := l.Digest.String()
	unlock, err := c.Store.lock(ctx.Done(), digest)
	if err != nil {
		return 0, err
	}
	defer unlock()
	if c.Store.Has(digest) {
		return 0, nil
	}
	final, err := c.Store.BlobPath(digest)
	if err != nil {
		return 0, err
	}
	partial := final + ".partial"
	f, err := os.OpenFile(partial, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	// The hash of what is already there, carried on as bytes come.
	h := sha256.New()
	have, err := io.Copy(h, f)
	if err != nil {
		return 0, err
	}
	attempts := c.Attempts
	if attempts <= 0 {
		attempts = 6
	}
	url := fmt.Sprintf("%s://%s/v2/%s/blobs/%s", repo.Scheme(), repo.RegistryStr(), repo.RepositoryStr(), digest)
	client := &http.Client{Transport: rt}
	var fetched int64
	var tell io.Writer = io.Discard
	if during != nil {
		tell = &counter{every: FetchingEvery, tell: func(n int64) { during(fetched + n) }}
	}
	for try := 1; ; try++ {
		if have > l.Size {
			have, h = 0, sha256.New()
			if err := f.Truncate(0); err != nil {
				return fetched, err
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return fetched, err
			}
		}
		if have < l.Size || l.Size == 0 {
			if ct, ok := tell.(*counter); ok {
				ct.n, ct.next = 0, FetchingEvery
			}
			n, err := c.getRange(ctx, client, url, f, h, &have, tell)
			fetched += n
			if err != nil {
				if ctx.Err() != nil {
					return fetched, ctx.Err()
				}
				var te *transport.Error
				if errors.As(err, &te) || try >= attempts && n == 0 {
					return fetched, err
				}
				if n == 0 {
					wait := c.wait(try, 0)
					if c.OnRetry != nil {
						c.OnRetry(repo.String(), wait, err.Error())
					}
					if err := sleep(ctx, wait); err != nil {
						return fetched, err
					}
				} else {
					// Progress was made: the next try resumes at once.
					try = 0
					if c.OnRetry != nil {
						c.OnRetry(repo.String(), 0, fmt.Sprintf("%v; resuming at byte %d", err, have))
					}
				}
				continue
			}
		}
		if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != digest {
			// A corrupt partial: start over once.
			if have > 0 && try < attempts {
				have = l.Size + 1
				continue
			}
			return fetched, fmt.Errorf("downloaded %d bytes with digest %s", have, got)
		}
		if err := f.Sync(); err != nil {
			return fetched, err
		}
		return fetched, os.Rename(partial, final)
	}
}

// getRange fetches url from byte *have on (a range request when it is not
// 0), appending to f and h. A server that answers the whole blob starts
// it over. Every byte appended is written to tell too.
func (c *Client) getRange(ctx context.Context, client *http.Client, url string, f *os.File, h hash.Hash, have *int64, tell io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	if *have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", *have))
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		if *have > 0 {
			if err := f.Truncate(0); err != nil {
				return 0, err
			}
			*have = 0
			h.Reset()
		}
	case http.StatusPartialContent:
		if !strings.HasPrefix(resp.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-", *have)) {
			return 0, fmt.Errorf("range request from byte %d answered %q", *have, resp.Header.Get("Content-Range"))
		}
	default:
		return 0, transport.CheckError(resp, http.StatusOK, http.StatusPartialContent)
	}
	if _, err := f.Seek(*have, io.SeekStart); err != nil {
		return 0, err
	}
	n, err := io.Copy(io.MultiWriter(f, h, tell), resp.Body)
	*have += n
	return n, err
}

// counter counts the bytes written to it and tells the count each time
// it passes another multiple of every.
type counter struct {
	n, next, every int64
	tell           func(int64)
}

func (c *counter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	if c.n >= c.next {
		c.tell(c.n)
		c.next = (c.n/c.every + 1) * c.every
	}
	return len(p), nil
}
