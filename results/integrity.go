package results

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"harness/schemas"
)

// KeyFileEnv names the environment variable that overrides where the record
// key is kept (a cluster's shared key, a test's fixed one).
const KeyFileEnv = "HARNESS_RECORD_KEY_FILE"

// KeyPath is where the user's record key is kept: $HARNESS_RECORD_KEY_FILE,
// else $XDG_STATE_HOME/harness/record.key, else
// ~/.local/state/harness/record.key. A sandbox hides this file from agents.
func KeyPath(getenv func(string) string) (string, error) {
	if p := getenv(KeyFileEnv); p != "" {
		return p, nil
	}
	if d := getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "harness", "record.key"), nil
	}
	home := getenv("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("record key: no home directory: set %s", KeyFileEnv)
		}
		home = h
	}
	return filepath.Join(home, ".local", "state", "harness", "record.key"), nil
}

// Key signs the record lines harness writes and checks those it reads
// back: HMAC-SHA256 keyed by a secret of the user's.
type Key struct {
	secret []byte
	path   string
}

// keyBytes is the size of a record key's secret.
const keyBytes = 32

// LoadKey reads the record key at path, creating it (mode 0600, in a
// directory of mode 0700) with a fresh random secret when it does not
// exist. Two processes creating it at once end up with the same key.
func LoadKey(path string) (*Key, error) {
	k, err := readKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return k, err
	}
	if err := CreateKeyFile(path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	return readKey(path)
}

// NewSecret is a fresh random record key as a key file holds it: 32
// bytes, hex-encoded, with a newline.
func NewSecret() string {
	secret := make([]byte, keyBytes)
	rand.Read(secret)
	return hex.EncodeToString(secret) + "\n"
}

// CreateKeyFile writes a new record key at path (mode 0600; its
// directory made with mode 0700). An existing file is never replaced:
// the error then wraps fs.ErrExist.
func CreateKeyFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("record key: %w (set %s to a writable place)", err, KeyFileEnv)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".record.key-*")
	if err != nil {
		return fmt.Errorf("record key: %w (set %s to a writable place)", err, KeyFileEnv)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(NewSecret())
	if err := errors.Join(werr, tmp.Chmod(0o600), tmp.Sync(), tmp.Close()); err != nil {
		return fmt.Errorf("record key %s: %w", path, err)
	}
	// A link never replaces a file: whoever links first wins, and the
	// others read the winner's key.
	if err := os.Link(tmp.Name(), path); err != nil {
		return fmt.Errorf("record key %s: %w", path, err)
	}
	return nil
}

// BadKeyError reports a key file that does not hold a record key.
type BadKeyError struct {
	Path string
}

// Error names the file and what a key file holds.
func (e *BadKeyError) Error() string {
	return fmt.Sprintf("record key %s: not a record key (want %d bytes, hex-encoded, on one line)", e.Path, keyBytes)
}

func readKey(path string) (*Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("record key: %w", err)
	}
	secret, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(secret) < 16 {
		return nil, &BadKeyError{Path: path}
	}
	return &Key{secret: secret, path: path}, nil
}

// NewKey is a key with the given secret, for tests.
func NewKey(secret []byte) *Key { return &Key{secret: secret} }

// Path is the file the key was read from ("" for NewKey).
func (k *Key) Path() string { return k.path }

func (k *Key) mac(body []byte) []byte {
	h := hmac.New(sha256.New, k.secret)
	h.Write(body)
	return h.Sum(nil)
}

// Sign returns line, an encoded record (a JSON object), with its MAC
// appended as the last field, "integrity", and the MAC itself. A line that
// already ends in an integrity field (a record copied as it was read) has
// it replaced.
func (k *Key) Sign(line []byte) (signed []byte, mac [sha256.Size]byte) {
	if body, _, ok := schemas.SplitIntegrity(line); ok {
		line = body
	}
	copy(mac[:], k.mac(line))
	return schemas.AppendIntegrity(line, hex.EncodeToString(mac[:])), mac
}

// ForeignLineError reports a line harness did not write.
type ForeignLineError struct {
	File string
	Line int
	// Why says what is wrong: not signed, a MAC that does not match, or
	// a line harness wrote elsewhere.
	Why string
}

// Error names the file and line.
func (e *ForeignLineError) Error() string {
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Why)
}

// Verify checks that line (line lineNo of file) is one harness signed
// with this key, and returns the line without its integrity field and the
// MAC. Anything else is a *ForeignLineError.
func (k *Key) Verify(file string, lineNo int, line []byte) (body []byte, mac [sha256.Size]byte, err error) {
	body, macHex, signed := schemas.SplitIntegrity(line)
	if !signed {
		return nil, mac, &ForeignLineError{File: file, Line: lineNo, Why: "not written by harness (it has no integrity field: added by something else, or written by a harness that did not sign its lines)"}
	}
	hex.Decode(mac[:], macHex)
	if !hmac.Equal(mac[:], k.mac(body)) {
		where := "the record key"
		if k.path != "" {
			where = k.path
		}
		return nil, mac, &ForeignLineError{File: file, Line: lineNo, Why: fmt.Sprintf("not written by harness: its integrity MAC does not match (changed after it was written, or signed with another key than %s)", where)}
	}
	return body, mac, nil
}
