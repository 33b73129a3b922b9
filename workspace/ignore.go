package workspace

import (
	"bufio"
	"bytes"
	"path"
	"strings"
)

// ignoreRules are the patterns of a tree's .gitignore files, read from the
// baseline (never from what the agent left, so an agent cannot hide its
// changes by ignoring them). They follow gitignore's rules: a pattern
// without a slash matches a name at any depth below its file's directory,
// one with a slash is anchored there, a trailing slash matches directories
// only, "**" matches any number of directories, and "!" re-includes.
type ignoreRules struct {
	rules []ignoreRule
}

type ignoreRule struct {
	base     string // directory of the .gitignore, "" for the root
	pattern  string
	negate   bool
	dirOnly  bool
	anchored bool
}

// add reads one .gitignore file found in directory base.
func (r *ignoreRules) add(base string, content []byte) {
	sc := bufio.NewScanner(bytes.NewReader(content))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rule := ignoreRule{base: base}
		if strings.HasPrefix(line, "!") {
			rule.negate, line = true, line[1:]
		} else if strings.HasPrefix(line, `\`) {
			line = line[1:]
		}
		if strings.HasSuffix(line, "/") {
			rule.dirOnly, line = true, strings.TrimRight(line, "/")
		}
		if strings.Contains(line, "/") {
			rule.anchored, line = true, strings.TrimPrefix(line, "/")
		}
		if line == "" {
			continue
		}
		rule.pattern = line
		r.rules = append(r.rules, rule)
	}
}

// ignored says whether the slash-separated path rel (a directory when dir)
// is ignored. The last matching rule decides, as in git.
func (r *ignoreRules) ignored(rel string, dir bool) bool {
	if r == nil {
		return false
	}
	out := false
	for _, rule := range r.rules {
		if rule.dirOnly && !dir {
			continue
		}
		sub := rel
		if rule.base != "" {
			var ok bool
			if sub, ok = strings.CutPrefix(rel, rule.base+"/"); !ok {
				continue
			}
		}
		var match bool
		if rule.anchored {
			match = globPath(strings.Split(rule.pattern, "/"), strings.Split(sub, "/"))
		} else {
			match, _ = path.Match(rule.pattern, path.Base(sub))
		}
		if match {
			out = !rule.negate
		}
	}
	return out
}

// globPath matches path segments against pattern segments, where "**"
// stands for any number of segments.
func globPath(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(segs); i++ {
				if globPath(pat[1:], segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], segs[0]); !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}
