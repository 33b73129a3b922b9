package acp

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

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

func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// workspaceRel turns p (absolute, or relative to root) into a path
// relative to root, refusing what lexically leaves it. Symlinks are left
// to os.Root, which follows them only while they stay inside.
func workspaceRel(root, p string) (string, error) {
	if p == "" {
		return "", errors.New("empty path")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", errors.New("path holds a NUL byte")
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	}
	p = filepath.Clean(p)
	for _, base := range []string{root, realPath(root)} {
		if within(base, p) {
			rel, _ := filepath.Rel(base, p)
			return rel, nil
		}
	}
	return "", ErrOutsideWorkspace
}

func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// openWorkspace opens the session's workspace as an os.Root: every file
// operation through it stays inside, whatever the agent swaps in between.
func openWorkspace(root string) (*os.Root, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", root, err)
	}
	return r, nil
}

// confineErr words an error of os.Root: an escape is a denial.
func confineErr(err error) (*jsonrpc2.Error, string) {
	if isEscape(err) {
		return denied(ErrOutsideWorkspace), "denied: " + ErrOutsideWorkspace.Error()
	}
	return fsError(err), err.Error()
}

// isEscape reports an os.Root error for a path that leads out of the root.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// checkRegular denies what is not a plain file of the workspace: FIFOs,
// devices, sockets, directories, and files with more than one hard link
// (which may be an outside file linked in).
func checkRegular(info fs.FileInfo) error {
	if !info.Mode().IsRegular() {
		return fmt.Errorf("not a regular file (%s)", info.Mode().Type())
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return fmt.Errorf("the file has %d hard links", st.Nlink)
	}
	return nil
}

// serveFS answers one fs request inside root. budget, when set, bounds the
// bytes of file content all requests hold at once.
func serveFS(o FSOptions, root string, r *Request, budget *byteBudget) (any, *jsonrpc2.Error, string) {
	switch r.Method {
	case MethodReadTextFile:
		var p ReadTextFileRequest
		if err := json.Unmarshal(r.Params, &p); err != nil {
			return nil, invalidParams(err), "invalid params"
		}
		rel, err := workspaceRel(root, p.Path)
		if err != nil {
			return nil, denied(err), "denied: " + err.Error()
		}
		ws, err := openWorkspace(root)
		if err != nil {
			return nil, fsError(err), err.Error()
		}
		defer ws.Close()
		// O_NONBLOCK: opening a FIFO must not wait for a writer.
		f, err := ws.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
		if err != nil {
			e, note := confineErr(err)
			return nil, e, note
		}
		defer f.Close()
		info, err := f.Stat()
		if err != nil {
			return nil, fsError(err), err.Error()
		}
		if err := checkRegular(info); err != nil {
			return nil, denied(err), "denied: " + err.Error()
		}
		if info.Size() > o.maxBytes() {
			msg := fmt.Sprintf("file is %d bytes, over the %d byte limit", info.Size(), o.maxBytes())
			return nil, &jsonrpc2.Error{Code: CodeInvalidParams, Message: msg}, "denied: " + msg
		}
		if budget != nil {
			// What is read is held three times over until the answer is
			// written: the bytes, the string, the encoded reply.
			hold := 3 * (info.Size() + 1)
			if !budget.take(hold) {
				msg := fmt.Sprintf("too many bytes in flight: the harness holds at most %d bytes of file content at once", budget.limit)
				return nil, &jsonrpc2.Error{Code: CodeInternalError, Message: msg}, "refused: " + msg
			}
			defer budget.give(hold)
		}
		b, err := io.ReadAll(io.LimitReader(f, o.maxBytes()+1))
		if err != nil {
			return nil, fsError(err), err.Error()
		}
		if int64(len(b)) > o.maxBytes() {
			msg := fmt.Sprintf("file grew over the %d byte limit while read", o.maxBytes())
			return nil, &jsonrpc2.Error{Code: CodeInvalidParams, Message: msg}, "denied: " + msg
		}
		return ReadTextFileResponse{Content: sliceLines(string(b), p.Line, p.Limit)}, nil, "allowed"
	case MethodWriteTextFile:
		var p WriteTextFileRequest
		if err := json.Unmarshal(r.Params, &p); err != nil {
			return nil, invalidParams(err), "invalid params"
		}
		rel, err := workspaceRel(root, p.Path)
		if err != nil {
			return nil, denied(err), "denied: " + err.Error()
		}
		if rel == "." {
			return nil, denied(errors.New("the workspace itself is not a file")), "denied: not a file"
		}
		if int64(len(p.Content)) > o.maxBytes() {
			msg := fmt.Sprintf("content is %d bytes, over the %d byte limit", len(p.Content), o.maxBytes())
			return nil, &jsonrpc2.Error{Code: CodeInvalidParams, Message: msg}, "denied: " + msg
		}
		ws, err := openWorkspace(root)
		if err != nil {
			return nil, fsError(err), err.Error()
		}
		defer ws.Close()
		if dir := filepath.Dir(rel); dir != "." {
			if err := ws.MkdirAll(dir, 0o755); err != nil {
				e, note := confineErr(err)
				return nil, e, note
			}
		}
		mode := fs.FileMode(0o644)
		if info, err := ws.Lstat(rel); err == nil {
			if info.Mode()&fs.ModeSymlink == 0 {
				if err := checkRegular(info); err != nil {
					return nil, denied(err), "denied: " + err.Error()
				}
				mode = info.Mode().Perm()
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			e, note := confineErr(err)
			return nil, e, note
		}
		if err := writeReplace(ws, rel, []byte(p.Content), mode); err != nil {
			e, note := confineErr(err)
			return nil, e, note
		}
		return empty{}, nil, "allowed"
	}
	return nil, methodNotFound(r.Method), "method not supported"
}

// writeReplace writes data to a new file beside rel and renames it over
// rel, so the write never goes through what rel was (a symlink, a hard
// link) and a reader never sees half of it.
func writeReplace(ws *os.Root, rel string, data []byte, mode fs.FileMode) error {
	dir, base := filepath.Split(rel)
	var tmp string
	var f *os.File
	for i := 0; ; i++ {
		var rnd [6]byte
		rand.Read(rnd[:])
		tmp = filepath.Join(dir, "."+base+".harness-"+hex.EncodeToString(rnd[:]))
		var err error
		f, err = ws.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || i > 10 {
			return err
		}
	}
	_, err := f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = ws.Rename(tmp, rel)
	}
	if err != nil {
		ws.Remove(tmp)
	}
	return err
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
