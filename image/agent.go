package image

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// systemDirs are never bound whole: binding one would hide the image's.
var systemDirs = map[string]bool{
	"/": true, "/bin": true, "/sbin": true, "/lib": true, "/lib64": true, "/lib32": true, "/etc": true,
	"/usr": true, "/usr/bin": true, "/usr/sbin": true, "/usr/lib": true, "/usr/lib64": true, "/usr/libexec": true,
	"/usr/local": true, "/usr/local/bin": true, "/usr/local/lib": true, "/usr/share": true, "/opt": true,
	"/home": true, "/root": true, "/tmp": true, "/var": true, "/srv": true, "/app": true, "/workdir": true,
	"/lib/x86_64-linux-gnu": true, "/usr/lib/x86_64-linux-gnu": true, "/lib/aarch64-linux-gnu": true, "/usr/lib/aarch64-linux-gnu": true,
}

// interpreters are programs whose first non-flag argument is a script
// they load (whose directory, and node_modules above it, is bound too).
var interpreters = []string{"node", "nodejs", "python", "python3", "bash", "sh", "perl", "ruby", "bun", "deno"}

// HostAgent works out how a program installed on the host runs inside
// img: the command line to use there (a "#!/usr/bin/env X" script is run
// by X's host path directly, relative script arguments made absolute) and
// the host paths to bind, read-only at their host paths: the program, its
// interpreter, the script's directory (and the node_modules directories
// above it), Python's standard library, and the shared libraries they load
// that the image lacks at the same path. Libraries the image has are the
// image's. It fails, saying why, when the program cannot work there: a
// glibc program needing a newer glibc than the image's.
func HostAgent(argv, env []string, img *Image) ([]string, []Bind, error) {
	if len(argv) == 0 {
		return nil, nil, errors.New("agent: empty command")
	}
	h := &hostAgent{img: img, seen: map[string]bool{}, env: env}
	prog, err := hostLookPath(argv[0], env)
	if err != nil {
		return nil, nil, fmt.Errorf("agent %s: %w", argv[0], err)
	}
	out := append([]string{prog}, argv[1:]...)
	if interp, args, ok := shebang(prog); ok {
		ip := interp
		if filepath.Base(interp) == "env" && len(args) > 0 {
			ip, err = hostLookPath(args[0], env)
			if err != nil {
				return nil, nil, fmt.Errorf("agent %s: its interpreter %s: %w", prog, args[0], err)
			}
			args = args[1:]
		}
		if err := h.addProgram(ip); err != nil {
			return nil, nil, err
		}
		if err := h.addScript(prog); err != nil {
			return nil, nil, err
		}
		out = append(append(append([]string{ip}, args...), prog), argv[1:]...)
	} else {
		if err := h.addProgram(prog); err != nil {
			return nil, nil, err
		}
		if isInterpreter(prog) {
			for i := 1; i < len(out); i++ {
				a := out[i]
				if strings.HasPrefix(a, "-") {
					continue
				}
				if fi, err := os.Stat(a); err == nil && fi.Mode().IsRegular() {
					abs, _ := filepath.Abs(a)
					out[i] = abs
					if err := h.addScript(abs); err != nil {
						return nil, nil, err
					}
				}
				break
			}
		}
	}
	if err := h.checkGlibc(); err != nil {
		return nil, nil, err
	}
	sort.Slice(h.binds, func(i, j int) bool { return h.binds[i].Src < h.binds[j].Src })
	return out, h.binds, nil
}

type hostAgent struct {
	img   *Image
	env   []string
	seen  map[string]bool
	binds []Bind
	// glibcNeed is the newest GLIBC_x.y symbol version the bound programs
	// and libraries ask for, and needer who asks.
	glibcNeed  string
	needer     string
	usesGlibc  bool
	interpPath string
}

func isInterpreter(p string) bool {
	base := filepath.Base(p)
	for _, i := range interpreters {
		if base == i || strings.HasPrefix(base, i) && strings.Trim(strings.TrimPrefix(base, i), "0123456789.") == "" {
			return true
		}
	}
	return false
}

// bind adds a host path once; library says to leave it to the image when
// the image has that path.
func (h *hostAgent) bind(p string, library bool) {
	if h.seen[p] {
		return
	}
	h.seen[p] = true
	if library && h.img.Exists(p) {
		return
	}
	h.binds = append(h.binds, Bind{Src: p})
}

// addProgram binds a program (every symlink on the way to it resolved and
// bound too) and, for an ELF file, its loader and libraries.
func (h *hostAgent) addProgram(p string) error {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return fmt.Errorf("agent %s: %w", p, err)
	}
	if real != p {
		h.seen[p] = true
		if !h.img.Exists(p) || !sameTarget(h.img, p, real) {
			h.binds = append(h.binds, Bind{Src: real, Dst: p})
		}
	}
	h.bind(real, false)
	if err := h.addELF(real); err != nil {
		return err
	}
	if strings.HasPrefix(filepath.Base(real), "python") {
		h.addPythonLib(real)
	}
	return nil
}

// sameTarget says whether the image's p resolves to the host path real.
func sameTarget(img *Image, p, real string) bool {
	return resolveIn(img.Rootfs, p) == real
}

// addScript binds a script: its directory unless that is a system
// directory (then the file alone), and node_modules above it.
func (h *hostAgent) addScript(p string) error {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return fmt.Errorf("agent script %s: %w", p, err)
	}
	if real != p {
		h.seen[p] = true
		h.binds = append(h.binds, Bind{Src: real, Dst: p})
	}
	dir := filepath.Dir(real)
	// A script inside a node_modules directory needs its siblings (the
	// packages it imports): the whole node_modules is bound.
	for d := dir; !systemDirs[d] && d != filepath.Dir(d); d = filepath.Dir(d) {
		if filepath.Base(d) == "node_modules" {
			dir = d
			break
		}
	}
	if systemDirs[dir] {
		h.bind(real, false)
	} else {
		h.bind(dir, false)
	}
	for d := filepath.Dir(dir); !systemDirs[d] && d != filepath.Dir(d); d = filepath.Dir(d) {
		nm := filepath.Join(d, "node_modules")
		if fi, err := os.Stat(nm); err == nil && fi.IsDir() && nm != dir {
			h.bind(nm, false)
		}
	}
	return nil
}

// addPythonLib binds the standard library of a python interpreter when
// the image lacks it.
func (h *hostAgent) addPythonLib(python string) {
	out, err := exec.Command(python, "-c", "import sys, sysconfig; print(sysconfig.get_paths()['stdlib'])").Output()
	if err != nil {
		return
	}
	if lib := strings.TrimSpace(string(out)); lib != "" && !systemDirs[lib] {
		h.bind(lib, true)
	}
}

// addELF binds an ELF file's dynamic loader and the shared libraries it
// needs, transitively.
func (h *hostAgent) addELF(p string) error {
	f, err := elf.Open(p)
	if err != nil {
		return nil // a script or data: nothing to load
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			b := make([]byte, prog.Filesz)
			if _, err := prog.ReadAt(b, 0); err == nil {
				interp := string(bytes.TrimRight(b, "\x00"))
				if strings.Contains(interp, "ld-musl") {
					if !h.img.Exists(interp) {
						return fmt.Errorf("agent %s is a musl program and the image has no musl (%s): install the agent in the image and run the image's own copy", p, interp)
					}
				} else {
					h.usesGlibc = true
					h.interpPath = interp
				}
				h.addLibrary(interp)
			}
		}
	}
	h.noteGlibc(f, p)
	needed, _ := f.ImportedLibraries()
	dirs := libDirs(f, p)
	for _, lib := range needed {
		found := ""
		for _, d := range dirs {
			cand := filepath.Join(d, lib)
			if _, err := os.Stat(cand); err == nil {
				found = cand
				break
			}
		}
		if found == "" {
			return fmt.Errorf("agent %s: library %s not found on the host", p, lib)
		}
		if h.seen[found] {
			continue
		}
		h.addLibrary(found)
		real, err := filepath.EvalSymlinks(found)
		if err != nil {
			return err
		}
		if err := h.addELF(real); err != nil {
			return err
		}
	}
	return nil
}

// addLibrary binds a library (and the file its symlink names) when the
// image lacks it.
func (h *hostAgent) addLibrary(p string) {
	if h.seen[p] {
		return
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return
	}
	if h.img.Exists(p) {
		h.seen[p] = true
		return
	}
	h.seen[p] = true
	h.binds = append(h.binds, Bind{Src: real, Dst: p})
}

// noteGlibc records the newest GLIBC_ version f needs.
func (h *hostAgent) noteGlibc(f *elf.File, p string) {
	needs, err := f.DynamicVersionNeeds()
	if err != nil {
		return
	}
	for _, n := range needs {
		for _, v := range n.Needs {
			if strings.HasPrefix(v.Dep, "GLIBC_") && versionLess(h.glibcNeed, v.Dep) {
				h.glibcNeed, h.needer = v.Dep, p
			}
		}
	}
}

// checkGlibc fails when the image's glibc (if the image has one at the
// loader's path) is older than what the agent needs.
func (h *hostAgent) checkGlibc() error {
	if !h.usesGlibc || h.glibcNeed == "" || !h.img.Exists(h.interpPath) {
		return nil
	}
	have := imageGlibc(h.img)
	if have == "" {
		return nil
	}
	if versionLess(have, h.glibcNeed) {
		return fmt.Errorf("agent %s needs %s but the image's glibc is %s: install the agent in the image and run the image's own copy, or use an image with a newer glibc", h.needer, h.glibcNeed, have)
	}
	return nil
}

// imageGlibc is the newest GLIBC_ version the image's libc.so.6 defines.
func imageGlibc(img *Image) string {
	for _, d := range []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"} {
		f, err := elf.Open(img.hostPath(filepath.Join(d, "libc.so.6")))
		if err != nil {
			continue
		}
		defs, err := f.DynamicVersions()
		f.Close()
		if err != nil {
			continue
		}
		newest := ""
		for _, v := range defs {
			if strings.HasPrefix(v.Name, "GLIBC_2") && versionLess(newest, v.Name) {
				newest = v.Name
			}
		}
		return newest
	}
	return ""
}

// versionLess compares GLIBC_x.y.z names ("" is the least).
func versionLess(a, b string) bool {
	if a == "" {
		return b != ""
	}
	pa := strings.Split(strings.TrimPrefix(a, "GLIBC_"), ".")
	pb := strings.Split(strings.TrimPrefix(b, "GLIBC_"), ".")
	for i := 0; i < max(len(pa), len(pb)); i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// libDirs is where the loader looks for f's libraries: its RPATH and
// RUNPATH ($ORIGIN expanded), the ld.so.conf directories, the defaults.
func libDirs(f *elf.File, p string) []string {
	var dirs []string
	origin := filepath.Dir(p)
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		vals, _ := f.DynString(tag)
		for _, v := range vals {
			for _, d := range strings.Split(v, ":") {
				d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", origin), "$ORIGIN", origin)
				if d != "" {
					dirs = append(dirs, d)
				}
			}
		}
	}
	dirs = append(dirs, ldSoConfDirs("/etc/ld.so.conf", 0)...)
	return append(dirs, "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib", "/usr/local/lib")
}

// ldSoConfDirs reads the directories of an ld.so.conf and its includes.
func ldSoConfDirs(file string, depth int) []string {
	f, err := os.Open(file)
	if err != nil || depth > 4 {
		return nil
	}
	defer f.Close()
	var dirs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if rest, ok := strings.CutPrefix(line, "include "); ok {
			matches, _ := filepath.Glob(strings.TrimSpace(rest))
			sort.Strings(matches)
			for _, m := range matches {
				dirs = append(dirs, ldSoConfDirs(m, depth+1)...)
			}
			continue
		}
		if strings.HasPrefix(line, "/") {
			dirs = append(dirs, line)
		}
	}
	return dirs
}

// shebang reads a script's "#!" line.
func shebang(p string) (string, []string, bool) {
	f, err := os.Open(p)
	if err != nil {
		return "", nil, false
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	rest, ok := strings.CutPrefix(line, "#!")
	if !ok {
		return "", nil, false
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", nil, false
	}
	// "#!/usr/bin/env -S node --flag": -S splits the rest.
	if filepath.Base(fields[0]) == "env" && len(fields) > 1 && fields[1] == "-S" {
		fields = append(fields[:1], fields[2:]...)
	}
	return fields[0], fields[1:], true
}

// hostLookPath finds a program on the PATH of env (falling back to the
// harness's own PATH) and returns its absolute path.
func hostLookPath(argv0 string, env []string) (string, error) {
	if strings.Contains(argv0, "/") {
		abs, err := filepath.Abs(argv0)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(abs); err != nil {
			return "", err
		}
		return abs, nil
	}
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, dir := range filepath.SplitList(p) {
				cand := filepath.Join(dir, argv0)
				if fi, err := os.Stat(cand); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
					return filepath.Abs(cand)
				}
			}
		}
	}
	p, err := exec.LookPath(argv0)
	if err != nil {
		return "", err
	}
	return filepath.Abs(p)
}
