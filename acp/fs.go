package acp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sourcegraph/jsonrpc2"
)

// FSOptions configure the fs/* service.
type FSOptions struct {
	// MaxBytes caps the size of a file read or written; 0 means 10 MiB.
	MaxBytes int64
}

func (o FSOptions) maxBytes() int64 {
	if o.MaxBytes <= 0 {
		return 10 << 20
	}
	return o.MaxBytes
}

// ErrOutsideWorkspace is a path that leads out of the session's workspace.
var ErrOutsideWorkspace = errors.New("path is outside the session workspace")

// ConfinePath resolves p (absolute, or relative to root) to a real path
// inside root. It refuses ".." escapes, absolute paths elsewhere and
// symlinks that lead out: the real path of the target, or of its nearest
// existing parent when the target does not exist yet, must lie inside the
// real path of root.
func ConfinePath(root, p string) (string, error) {
	if p == "" {
		return "", errors.New("empty path")
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("workspace %s: %w", root, err)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	}
	p = filepath.Clean(p)
	if !within(root, p) && !within(realRoot, p) {
		return "", ErrOutsideWorkspace
	}
	// Resolve symlinks on the longest existing prefix.
	existing, rest := p, ""
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			return "", ErrOutsideWorkspace
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", err
	}
	if rest != "" {
		real = filepath.Join(real, rest)
	}
	if !within(realRoot, real) {
		return "", ErrOutsideWorkspace
	}
	return real, nil
}

func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

func serveFS(o FSOptions, root string, r *Request) (any, *jsonrpc2.Error, string) {
	switch r.Method {
	case MethodReadTextFile:
		var p ReadTextFileRequest
		if err := json.Unmarshal(r.Params, &p); err != nil {
			return nil, invalidParams(err), "invalid params"
		}
		path, err := ConfinePath(root, p.Path)
		if err != nil {
			return nil, denied(err), "denied: " + err.Error()
		}
		info, err := os.Stat(path)
		if err != nil {
			return nil, fsError(err), err.Error()
		}
		if info.IsDir() {
			return nil, &jsonrpc2.Error{Code: CodeInvalidParams, Message: "path is a directory"}, "path is a directory"
		}
		if info.Size() > o.maxBytes() {
			msg := fmt.Sprintf("file is %d bytes, over the %d byte limit", info.Size(), o.maxBytes())
			return nil, &jsonrpc2.Error{Code: CodeInvalidParams, Message: msg}, "denied: " + msg
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fsError(err), err.Error()
		}
		return ReadTextFileResponse{Content: sliceLines(string(b), p.Line, p.Limit)}, nil, "allowed"
	case MethodWriteTextFile:
		var p WriteTextFileRequest
		if err := json.Unmarshal(r.Params, &p); err != nil {
			return nil, invalidParams(err), "invalid params"
		}
		path, err := ConfinePath(root, p.Path)
		if err != nil {
			return nil, denied(err), "denied: " + err.Error()
		}
		if int64(len(p.Content)) > o.maxBytes() {
			msg := fmt.Sprintf("content is %d bytes, over the %d byte limit", len(p.Content), o.maxBytes())
			return nil, &jsonrpc2.Error{Code: CodeInvalidParams, Message: msg}, "denied: " + msg
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fsError(err), err.Error()
		}
		if err := os.WriteFile(path, []byte(p.Content), 0o644); err != nil {
			return nil, fsError(err), err.Error()
		}
		return empty{}, nil, "allowed"
	}
	return nil, methodNotFound(r.Method), "method not supported"
}

func denied(err error) *jsonrpc2.Error {
	return &jsonrpc2.Error{Code: CodeInvalidParams, Message: "access denied: " + err.Error()}
}

func fsError(err error) *jsonrpc2.Error {
	if errors.Is(err, fs.ErrNotExist) {
		return &jsonrpc2.Error{Code: CodeResourceNotFound, Message: "file not found"}
	}
	return &jsonrpc2.Error{Code: CodeInternalError, Message: err.Error()}
}

// sliceLines returns limit lines of s starting at the 1-based line.
func sliceLines(s string, line, limit *int) string {
	if line == nil && limit == nil {
		return s
	}
	start := 0
	if line != nil && *line > 1 {
		for n := 1; n < *line; n++ {
			i := strings.IndexByte(s[start:], '\n')
			if i < 0 {
				return ""
			}
			start += i + 1
		}
	}
	rest := s[start:]
	if limit == nil {
		return rest
	}
	end := 0
	for n := 0; n < *limit; n++ {
		i := strings.IndexByte(rest[end:], '\n')
		if i < 0 {
			return rest
		}
		end += i + 1
	}
	return rest[:end]
}
