package graders

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"
	"github.com/evanw/esbuild/pkg/api"

	"harness/schemas"
)

// jsGrader runs a JavaScript grade(input) in-process with goja, so no
// Node.js is needed. See jsRuntime for how state is kept apart between
// records.
type jsGrader struct {
	name      string
	file      string // for messages: the file or config the code came from
	prog      *goja.Program
	timeout   time.Duration
	threshold float64
	pool      sync.Pool // of *jsRuntime
}

// moduleWrapper turns CommonJS output into an expression whose value is a
// function returning the grade function.
const (
	moduleHead = "(function(exports, require, module, __filename, __dirname) {\n"
	moduleTail = "\n;var __m = module.exports, __d = __m && __m.default;\n" +
		"if (__m && typeof __m.grade === 'function') return __m.grade;\n" +
		"if (typeof __d === 'function') return __d;\n" +
		"if (__d && typeof __d.grade === 'function') return __d.grade;\n" +
		"if (typeof __m === 'function') return __m;\n" +
		"if (typeof grade === 'function') return grade;\n" +
		"return undefined;\n})"
)

// newJSModule builds a grader from a JS/TS file (acp-harness module
// exporting grade, or an RFT-style script defining grade).
func newJSModule(name, file, src, ext string, timeout time.Duration, threshold float64) (*jsGrader, error) {
	loader := api.LoaderJS
	switch ext {
	case ".ts", ".mts", ".cts":
		loader = api.LoaderTS
	}
	res := api.Transform(src, api.TransformOptions{
		Loader:         loader,
		Format:         api.FormatCommonJS,
		Target:         api.ES2017,
		Sourcefile:     file,
		Platform:       api.PlatformNeutral,
		Sourcemap:      api.SourceMapExternal,
		SourcesContent: api.SourcesContentExclude,
	})
	if len(res.Errors) > 0 {
		var msgs []string
		for _, m := range res.Errors {
			loc := ""
			if m.Location != nil {
				loc = fmt.Sprintf("%d:%d: ", m.Location.Line, m.Location.Column)
			}
			msgs = append(msgs, loc+m.Text)
		}
		return nil, fmt.Errorf("grader %s: %s", file, strings.Join(msgs, "; "))
	}
	if loader == api.LoaderTS {
		if err := checkDroppedImports(file, src, string(res.Code)); err != nil {
			return nil, err
		}
	}
	// The source map takes the positions of errors and stack traces back
	// to the lines the author wrote, not those of the transpiled code.
	code := moduleHead + string(res.Code) + moduleTail + sourceMapComment(res.Map, file, strings.Count(moduleHead, "\n"))
	prog, err := goja.Compile(file, code, false)
	if err != nil {
		return nil, fmt.Errorf("grader %s: %w", file, err)
	}
	g := &jsGrader{name: name, file: file, prog: prog, timeout: timeout, threshold: threshold}
	if err := g.check(); err != nil {
		return nil, withImportLine(err, src)
	}
	return g, nil
}

// newJSScript builds a grader from RFT-style script text: code defining a
// function grade(input), or just the body of such a function. at says
// where the text is, for the positions of errors: the file and the line of
// it the script's first line is on (0 when unknown: positions then count
// from the script's first line, under the name file).
func newJSScript(name, file string, at scriptAt, src string, timeout time.Duration, threshold float64) (*jsGrader, error) {
	// The wrappers open on the script's first line, so every line of the
	// program is the line of the script it came from.
	wrap := func(body string) string {
		return "(function() {" + body + "\n;if (typeof grade === 'function') return grade; return undefined;\n})"
	}
	where, pad := file, ""
	if at.line > 0 {
		where, pad = at.file, strings.Repeat("\n", at.line-1)
	}
	code := src
	if _, err := goja.Compile(where, pad+src, false); err != nil {
		// Not a valid script on its own (a top-level return): treat it as
		// the body of grade(input).
		code = "function grade(input) {" + src + "\n}"
		if _, err2 := goja.Compile(where, pad+code, false); err2 != nil {
			return nil, fmt.Errorf("grader %s: %w", file, err)
		}
	}
	prog, err := goja.Compile(where, pad+wrap(code), false)
	if err != nil {
		return nil, fmt.Errorf("grader %s: %w", file, err)
	}
	g := &jsGrader{name: name, file: file, prog: prog, timeout: timeout, threshold: threshold}
	if err := g.check(); err != nil {
		return nil, withImportLine(err, src)
	}
	return g, nil
}

// Name implements Grader.
func (g *jsGrader) Name() string { return g.name }

// scriptAt is where a script's text sits: the file and the line its first
// line is on (0: unknown).
type scriptAt struct {
	file string
	line int
}

// sourceMapComment is the inline source map comment for code that esbuild
// transpiled from file, with its map shifted down by the skip lines put
// before the code. Its source is named by file's base name, which the
// runtime resolves against file: positions then name file itself.
func sourceMapComment(raw []byte, file string, skip int) string {
	var m map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return ""
	}
	mappings, _ := m["mappings"].(string)
	m["mappings"] = strings.Repeat(";", skip) + mappings
	m["sources"] = []string{filepath.Base(file)}
	b, err := json.Marshal(m)
	if err != nil {
		return ""
	}
	return "\n//# sourceMappingURL=data:application/json;base64," + base64.StdEncoding.EncodeToString(b)
}

// importError is a grader's import of a module the in-process runtime
// cannot load: an npm package, a Node built-in or another file.
type importError struct {
	file, module string
	line         int // of the import, when known
}

func (e *importError) Error() string {
	at := ""
	if e.line > 0 {
		at = fmt.Sprintf(":%d", e.line)
	}
	return fmt.Sprintf("grader %s%s imports %q: the in-process JavaScript runtime cannot load npm packages, Node built-ins or other files (type-only imports are fine); bundle the grader into one file, or make it an executable grader (e.g. a script starting with #!/usr/bin/env bun or node)", e.file, at, e.module)
}

// esmImport matches an import statement as esbuild prints it in ESM
// output: its bindings (empty for a bare import) and its module.
var esmImport = regexp.MustCompile(`(?m)^import\s+(?:(.*?)\s+from\s+)?"((?:[^"\\]|\\.)*)";?\s*$`)

// checkDroppedImports reports an import TypeScript's rules dropped from a
// module (code, the transformed source) although it is not type-only: an
// import none of whose names the grader uses. It would load nothing here,
// where it cannot load, so it is the same load error as a used one. An
// import whose names appear elsewhere in the source is taken as used for
// types (import { Grader } used only in annotations) and is fine, as is
// every import type.
func checkDroppedImports(file, src, code string) error {
	verbatim := api.Transform(src, api.TransformOptions{
		Loader:      api.LoaderTS,
		Format:      api.FormatESModule,
		Target:      api.ESNext,
		Sourcefile:  file,
		TsconfigRaw: `{"compilerOptions": {"verbatimModuleSyntax": true}}`,
	})
	if len(verbatim.Errors) > 0 {
		return nil // the first transform passed; nothing more to learn here
	}
	for _, m := range esmImport.FindAllStringSubmatch(string(verbatim.Code), -1) {
		bindings, module := m[1], m[2]
		if strings.Contains(code, "require("+strconv.Quote(module)+")") {
			continue // kept: loading it fails as the module runs
		}
		names := importNames(bindings)
		// The module's name is no use of a binding ("* as path" from
		// "node:path").
		rest := strings.NewReplacer(`"`+module+`"`, `""`, `'`+module+`'`, `''`).Replace(src)
		if bindings != "" && (len(names) == 0 || namesUsed(rest, names)) {
			continue // import { type A } (printed "import {} from"), or used
		}
		return &importError{file: file, module: module, line: importLine(src, module)}
	}
	return nil
}

// importNames lists the local names an import's bindings declare:
// "A, { b, c as d }" gives A, b, d; "* as ns" gives ns.
func importNames(bindings string) []string {
	var names []string
	for part := range strings.FieldsFuncSeq(bindings, func(r rune) bool { return r == ',' || r == '{' || r == '}' }) {
		fields := strings.Fields(part)
		if len(fields) > 0 {
			names = append(names, fields[len(fields)-1])
		}
	}
	return names
}

// namesUsed reports whether any of names occurs in src as a word more than
// once: besides its import.
func namesUsed(src string, names []string) bool {
	ident := func(b byte) bool {
		return b == '_' || b == '$' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= 0x80
	}
	for _, name := range names {
		n := 0
		for i := 0; ; {
			j := strings.Index(src[i:], name)
			if j < 0 {
				break
			}
			start, end := i+j, i+j+len(name)
			if (start == 0 || !ident(src[start-1])) && (end == len(src) || !ident(src[end])) {
				n++
			}
			i = end
		}
		if n > 1 {
			return true
		}
	}
	return false
}

// withImportLine adds to an import error the line of src that names the
// module.
func withImportLine(err error, src string) error {
	var imp *importError
	if errors.As(err, &imp) && imp.line == 0 {
		imp.line = importLine(src, imp.module)
	}
	return err
}

// importLine is the line of src that names module in quotes first, or 0.
func importLine(src, module string) int {
	for _, q := range []string{`"`, `'`} {
		if i := strings.Index(src, q+module+q); i >= 0 {
			return strings.Count(src[:i], "\n") + 1
		}
	}
	return 0
}

// jsRuntime is a goja runtime prepared for one grader: console and
// require installed, the program compiled in. Runtimes are pooled; every
// call re-evaluates the module body inside its wrapper function, so
// top-level declarations (var, let, const, function) start fresh for each
// record. Only implicit globals (globalThis.x = ...) could survive from one
// call to the next. A runtime that was interrupted or threw is dropped.
type jsRuntime struct {
	vm      *goja.Runtime
	outer   goja.Callable // the module wrapper
	console tailBuffer    // what the current call logged
}

func (g *jsGrader) newRuntime() (*jsRuntime, error) {
	rt := &jsRuntime{vm: goja.New(), console: tailBuffer{n: stderrTail}}
	vm := rt.vm
	logf := func(call goja.FunctionCall) goja.Value {
		parts := make([]string, len(call.Arguments))
		for i, a := range call.Arguments {
			parts[i] = a.String()
		}
		rt.console.Write([]byte(strings.Join(parts, " ") + "\n"))
		return goja.Undefined()
	}
	console := vm.NewObject()
	for _, k := range []string{"log", "error", "warn", "info", "debug"} {
		_ = console.Set(k, logf)
	}
	_ = vm.Set("console", console)
	v, err := vm.RunProgram(g.prog)
	if err != nil {
		return nil, err
	}
	outer, ok := goja.AssertFunction(v)
	if !ok {
		return nil, fmt.Errorf("grader %s: internal: wrapper is not a function", g.file)
	}
	rt.outer = outer
	return rt, nil
}

// instance evaluates the module body afresh and returns its grade function.
func (g *jsGrader) instance(rt *jsRuntime) (goja.Callable, error) {
	vm := rt.vm
	file := g.file
	require := func(call goja.FunctionCall) goja.Value {
		panic(vm.NewGoError(&importError{file: file, module: call.Argument(0).String()}))
	}
	module := vm.NewObject()
	exports := vm.NewObject()
	_ = module.Set("exports", exports)
	gv, err := rt.outer(goja.Undefined(), exports, vm.ToValue(require), module, vm.ToValue(g.file), vm.ToValue("."))
	if err != nil {
		return nil, err
	}
	fn, ok := goja.AssertFunction(gv)
	if !ok {
		return nil, fmt.Errorf("grader %s: does not define grade (want `export function grade(input)`, `export const grade = ...`, a default export, or a top-level `function grade(input)`)", g.file)
	}
	return fn, nil
}

// check evaluates the program once at load time so a missing grade, a
// syntax error or an npm import is reported before any agent runs.
func (g *jsGrader) check() error {
	rt, err := g.newRuntime()
	if err == nil {
		t := time.AfterFunc(g.timeout, func() { rt.vm.Interrupt("timeout") })
		_, err = g.instance(rt)
		t.Stop()
		if err == nil {
			g.pool.Put(rt)
		}
	}
	if err != nil {
		var ie *goja.InterruptedError
		if errors.As(err, &ie) {
			return fmt.Errorf("grader %s: top-level code did not finish within %v", g.file, g.timeout)
		}
		var imp *importError
		if errors.As(err, &imp) {
			return imp // the message alone, not the JavaScript exception around it
		}
		if strings.HasPrefix(err.Error(), "grader ") {
			return err
		}
		return fmt.Errorf("grader %s: %w", g.file, err)
	}
	return nil
}

// Grade implements Grader.
func (g *jsGrader) Grade(ctx context.Context, in *Input) schemas.GraderResult {
	start := time.Now()
	return finish(g.grade(ctx, in), g.name, start)
}

func (g *jsGrader) grade(ctx context.Context, in *Input) schemas.GraderResult {
	rt, _ := g.pool.Get().(*jsRuntime)
	if rt == nil {
		var err error
		if rt, err = g.newRuntime(); err != nil {
			return failure(schemas.ErrGraderError, "starting JavaScript runtime: %v", err)
		}
	}
	vm := rt.vm
	rt.console = tailBuffer{n: stderrTail}
	cons := &rt.console
	reuse := false
	timedOut := make(chan struct{})
	t := time.AfterFunc(g.timeout, func() { close(timedOut); vm.Interrupt("timeout") })
	stop := context.AfterFunc(ctx, func() { vm.Interrupt("cancelled") })
	defer func() {
		// Pool the runtime only after a clean call whose interrupts were
		// disarmed before they could fire.
		stopped, unhooked := t.Stop(), stop()
		if reuse && stopped && unhooked {
			vm.ClearInterrupt()
			g.pool.Put(rt)
		}
	}()
	jsErr := func(err error) schemas.GraderResult {
		var ie *goja.InterruptedError
		if errors.As(err, &ie) {
			select {
			case <-timedOut:
				return schemas.GraderResult{Error: &schemas.ErrorInfo{Class: schemas.ErrGraderTimeout,
					Message: fmt.Sprintf("grade(input) did not finish within %v", g.timeout), Stderr: tail(cons.String(), 2000)}}
			default:
				return failure(schemas.ErrGraderError, "grading cancelled: %v", ctx.Err())
			}
		}
		msg := err.Error()
		var ex *goja.Exception
		var imp *importError
		switch {
		case errors.As(err, &imp):
			msg = imp.Error()
		case errors.As(err, &ex):
			msg = ex.String()
		}
		return schemas.GraderResult{Error: &schemas.ErrorInfo{Class: schemas.ErrGraderError,
			Message: "grade(input) threw: " + truncate(msg, 1000), Stderr: tail(cons.String(), 2000)}}
	}
	fn, err := g.instance(rt)
	if err != nil {
		return jsErr(err)
	}
	jsonObj := vm.Get("JSON").ToObject(vm)
	arg, err := inputValue(vm, jsPayload(in))
	if err != nil {
		return failure(schemas.ErrGraderError, "encoding grader input: %v", err)
	}
	v, err := fn(goja.Undefined(), arg)
	if err != nil {
		return jsErr(err)
	}
	if p, ok := v.Export().(*goja.Promise); ok {
		switch p.State() {
		case goja.PromiseStatePending:
			return failure(schemas.ErrGraderError, "grade(input) returned a promise that never settled (there is no event loop: timers and I/O are not available)")
		case goja.PromiseStateRejected:
			r := p.Result()
			msg := r.String()
			if o, ok := r.(*goja.Object); ok {
				if st := o.Get("stack"); st != nil && !goja.IsUndefined(st) {
					msg = st.String()
				}
			}
			return schemas.GraderResult{Error: &schemas.ErrorInfo{Class: schemas.ErrGraderError,
				Message: "grade(input) rejected: " + truncate(msg, 1000), Stderr: tail(cons.String(), 2000)}}
		}
		v = p.Result()
	}
	res := g.convert(vm, jsonObj, v)
	reuse = true
	return res
}

// convert turns grade's return value into a result: a number is the score,
// a boolean is pass, an object is a grader result.
func (g *jsGrader) convert(vm *goja.Runtime, jsonObj *goja.Object, v goja.Value) schemas.GraderResult {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return failure(schemas.ErrGraderInvalid, "grade(input) returned %v (want a number 0..1 or a result object)", v)
	}
	switch x := v.Export().(type) {
	case int64:
		r, ei := scoreResult(float64(x), g.threshold)
		r.Error = ei
		return r
	case float64:
		r, ei := scoreResult(x, g.threshold)
		r.Error = ei
		return r
	case bool:
		if x {
			return schemas.GraderResult{Pass: true, Score: 1}
		}
		return schemas.GraderResult{Pass: false, Score: 0}
	case string:
		return failure(schemas.ErrGraderInvalid, "grade(input) returned a string %q (want a number 0..1 or a result object)", truncate(x, 100))
	}
	// JSON.stringify would turn NaN and ±Infinity into null, and a result
	// that is unsure of its score into one that has none.
	if o, ok := v.(*goja.Object); ok {
		if sv := o.Get("score"); sv != nil && !goja.IsUndefined(sv) {
			f, isNum := sv.Export().(float64)
			_, isInt := sv.Export().(int64)
			switch {
			case goja.IsNull(sv) || !isNum && !isInt:
				return failure(schemas.ErrGraderInvalid, "grade(input) returned score %v (want a number 0..1)", sv)
			case isNum && (math.IsNaN(f) || math.IsInf(f, 0)):
				return failure(schemas.ErrGraderInvalid, "grade(input) returned score %v (want a number 0..1)", f)
			}
		}
	}
	stringify, _ := goja.AssertFunction(jsonObj.Get("stringify"))
	s, err := stringify(jsonObj, v)
	if err != nil {
		return failure(schemas.ErrGraderInvalid, "grade(input) returned a value that is not JSON: %v", err)
	}
	r, ei := parseResult([]byte(s.String()), g.threshold)
	if ei != nil {
		ei.Message = "grade(input) returned an invalid result: " + ei.Message
		return schemas.GraderResult{Error: ei}
	}
	return r
}

// inputValue builds the JS object grade(input) receives: plain JS objects
// and arrays (keys in sorted order, so graders are deterministic), built
// directly from Go values, which is several times faster than JSON.parse.
// The trajectory, the biggest part and one most graders never read, is
// converted on first access.
func inputValue(vm *goja.Runtime, p map[string]any) (_ goja.Value, err error) {
	defer func() {
		// toJS reports conversion failures by panicking with a JS error.
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	obj := vm.NewObject()
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "trajectory" {
			var cached goja.Value
			raw := p[k]
			get := vm.ToValue(func(goja.FunctionCall) goja.Value {
				if cached == nil {
					v, err := goValueToJS(vm, raw)
					if err != nil {
						panic(vm.NewGoError(err))
					}
					cached = v
				}
				return cached
			})
			set := vm.ToValue(func(c goja.FunctionCall) goja.Value {
				cached = c.Argument(0)
				return goja.Undefined()
			})
			if err := obj.DefineAccessorProperty(k, get, set, goja.FLAG_TRUE, goja.FLAG_TRUE); err != nil {
				return nil, err
			}
			continue
		}
		v, err := goValueToJS(vm, p[k])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		_ = obj.Set(k, v)
	}
	return obj, nil
}

// goValueToJS converts a Go value to plain JS values; maps and slices of
// any are walked directly, anything else goes through its JSON encoding.
func goValueToJS(vm *goja.Runtime, v any) (goja.Value, error) {
	switch x := v.(type) {
	case map[string]any, []any, string, bool, float64, int, int64, nil:
		return toJS(vm, x), nil
	case schemas.Turns:
		if !x.Multi && len(x.List) == 1 {
			return vm.ToValue(x.List[0]), nil
		}
		items := make([]any, len(x.List))
		for i, t := range x.List {
			items[i] = t
		}
		return vm.NewArray(items...), nil
	case schemas.Timing:
		o := vm.NewObject()
		_ = o.Set("start", x.Start)
		_ = o.Set("end", x.End)
		if x.FirstResponse != nil {
			_ = o.Set("firstResponse", *x.FirstResponse)
		}
		_ = o.Set("sessionCreation", x.SessionCreation)
		_ = o.Set("total", x.Total)
		return o, nil
	case *schemas.Usage:
		if x == nil {
			return goja.Null(), nil
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var data any
	if err := json.Unmarshal(b, &data); err != nil {
		return nil, err
	}
	return toJS(vm, data), nil
}

// toJS converts a decoded JSON value into plain JS values: objects with
// their keys in sorted order, real arrays.
func toJS(vm *goja.Runtime, v any) goja.Value {
	switch x := v.(type) {
	case map[string]any:
		o := vm.NewObject()
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			e, err := goValueToJS(vm, x[k])
			if err != nil {
				panic(vm.NewGoError(err))
			}
			_ = o.Set(k, e)
		}
		return o
	case []any:
		items := make([]any, len(x))
		for i, e := range x {
			v, err := goValueToJS(vm, e)
			if err != nil {
				panic(vm.NewGoError(err))
			}
			items[i] = v
		}
		return vm.NewArray(items...)
	case nil:
		return goja.Null()
	}
	return vm.ToValue(v)
}
