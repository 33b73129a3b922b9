package harbor

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// composeOverride is what a task's environment/docker-compose.yaml sets
// that can be honoured here. Harbor merges that file over its own, whose
// service main is the trial's container (built from environment/, or
// docker_image); other services are sidecars on a container network. Here
// there is no container network and no service but the trial's: of the
// file, main's environment is honoured, and the build context or image it
// names; anything else makes the task refused, named.
type composeOverride struct {
	// Build is the build context (or Dockerfile) main names, Image the
	// image; "" when it names none.
	Build, Image string
	// Env is main's environment.
	Env map[string]string
}

// composeMain is the service Harbor runs the agent and verifier in.
const composeMain = "main"

// readCompose reads a compose file; lookup finds the variables its values
// name (${VAR}, ${VAR:-default}, ...), as docker compose would in Harbor:
// the task's [environment] env, then the host's.
func readCompose(file string, lookup func(string) (string, bool)) (*composeOverride, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	out := &composeOverride{}
	if len(doc.Content) == 0 {
		return out, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: not a compose file (a mapping with services)", file, root.Line)
	}
	type refusal struct {
		line int
		text string
	}
	var refused []refusal
	refuse := func(n *yaml.Node, name, why string) {
		s := fmt.Sprintf("%s (line %d", name, n.Line)
		if why != "" {
			s += "; " + why
		}
		refused = append(refused, refusal{n.Line, s + ")"})
	}
	var main *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch {
		case k.Value == "version" || k.Value == "name" || strings.HasPrefix(k.Value, "x-"):
		case k.Value == "services" && v.Kind == yaml.MappingNode:
			for j := 0; j+1 < len(v.Content); j += 2 {
				name, svc := v.Content[j], v.Content[j+1]
				if name.Value == composeMain {
					main = svc
					continue
				}
				refuse(name, "services."+name.Value, "a service beside main: there is no container network between services here")
			}
		default:
			refuse(k, k.Value, "")
		}
	}
	var errs []string
	if main != nil && main.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(main.Content); i += 2 {
			k, v := main.Content[i], main.Content[i+1]
			field := "services.main." + k.Value
			switch k.Value {
			case "environment":
				env, err := composeEnv(v, lookup)
				if err != nil {
					errs = append(errs, fmt.Sprintf("%s:%d: %s: %v", file, v.Line, field, err))
				}
				out.Env = env
			case "image":
				s, err := interpolate(v.Value, lookup)
				if err != nil {
					errs = append(errs, fmt.Sprintf("%s:%d: %s: %v", file, v.Line, field, err))
				}
				out.Image = s
			case "build":
				ctx, df, bad, err := composeBuild(v, lookup)
				if err != nil {
					errs = append(errs, fmt.Sprintf("%s:%d: %s: %v", file, v.Line, field, err))
				}
				for _, n := range bad {
					refuse(n, field+"."+n.Value, "")
				}
				out.Build = ctx
				if df != "" {
					out.Build = joinPath(ctx, df)
				}
			default:
				refuse(k, field, "")
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	if len(refused) > 0 {
		sort.SliceStable(refused, func(i, j int) bool { return refused[i].line < refused[j].line })
		var names []string
		for _, r := range refused {
			names = append(names, r.text)
		}
		return nil, fmt.Errorf("%s: %s: cannot be honoured here (of a compose file, only the main service's environment, build and image are); run this task with Harbor and Docker", file, strings.Join(names, ", "))
	}
	return out, nil
}

func joinPath(dir, file string) string {
	if strings.HasPrefix(file, "/") {
		return file
	}
	return strings.TrimSuffix(dir, "/") + "/" + file
}

// composeBuild reads main's build: a context, or {context, dockerfile};
// other build settings (args, target, ...) are returned to be refused.
func composeBuild(n *yaml.Node, lookup func(string) (string, bool)) (ctx, dockerfile string, bad []*yaml.Node, err error) {
	if n.Kind == yaml.ScalarNode {
		ctx, err = interpolate(n.Value, lookup)
		return ctx, "", nil, err
	}
	if n.Kind != yaml.MappingNode {
		return "", "", nil, fmt.Errorf("must be a build context or a mapping with context")
	}
	ctx = "."
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case "context":
			if ctx, err = interpolate(v.Value, lookup); err != nil {
				return "", "", nil, err
			}
		case "dockerfile":
			if dockerfile, err = interpolate(v.Value, lookup); err != nil {
				return "", "", nil, err
			}
		default:
			bad = append(bad, k)
		}
	}
	return ctx, dockerfile, bad, nil
}

// composeEnv reads a service's environment: a mapping (a null value takes
// the variable from lookup) or a list of NAME=value (a bare NAME takes it
// from lookup); a variable lookup does not have is left out, as docker
// compose leaves it.
func composeEnv(n *yaml.Node, lookup func(string) (string, bool)) (map[string]string, error) {
	env := map[string]string{}
	set := func(name string, value *string) error {
		if value == nil {
			if v, ok := lookup(name); ok {
				env[name] = v
			}
			return nil
		}
		v, err := interpolate(*value, lookup)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		env[name] = v
		return nil
	}
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!null":
	case n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			var value *string
			if v.Tag != "!!null" {
				value = &v.Value
			}
			if err := set(k.Value, value); err != nil {
				return nil, err
			}
		}
	case n.Kind == yaml.SequenceNode:
		for _, item := range n.Content {
			name, value, ok := strings.Cut(item.Value, "=")
			var vp *string
			if ok {
				vp = &value
			}
			if err := set(name, vp); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("must be a mapping or a list of NAME=value")
	}
	return env, nil
}

// interpolate substitutes variables in a compose value as docker compose
// does: $$ is $, $VAR and ${VAR} the variable ("" when unset),
// ${VAR:-default} the default when VAR is unset or empty (${VAR-default}:
// unset), ${VAR:+other} other when VAR is set and not empty (${VAR+other}:
// set), ${VAR:?message} an error when VAR is unset or empty (${VAR?message}:
// unset).
func interpolate(s string, lookup func(string) (string, bool)) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		next := s[i+1]
		switch {
		case next == '$':
			b.WriteByte('$')
			i++
		case next == '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", fmt.Errorf("%q: ${ without a closing }", s)
			}
			v, err := expand(s[i+2:i+2+end], lookup)
			if err != nil {
				return "", err
			}
			b.WriteString(v)
			i += 2 + end
		case isNameByte(next, true):
			j := i + 1
			for j < len(s) && isNameByte(s[j], j == i+1) {
				j++
			}
			v, _ := lookup(s[i+1 : j])
			b.WriteString(v)
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func isNameByte(c byte, first bool) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
}

// expand is one ${...} of interpolate.
func expand(expr string, lookup func(string) (string, bool)) (string, error) {
	j := 0
	for j < len(expr) && isNameByte(expr[j], j == 0) {
		j++
	}
	name, op := expr[:j], expr[j:]
	if name == "" {
		return "", fmt.Errorf("${%s}: not a variable name", expr)
	}
	v, set := lookup(name)
	colon := strings.HasPrefix(op, ":")
	present := set && (!colon || v != "")
	rest := strings.TrimPrefix(op, ":")
	switch {
	case op == "":
		return v, nil
	case strings.HasPrefix(rest, "-"):
		if present {
			return v, nil
		}
		return rest[1:], nil
	case strings.HasPrefix(rest, "+"):
		if present {
			return rest[1:], nil
		}
		return "", nil
	case strings.HasPrefix(rest, "?"):
		if present {
			return v, nil
		}
		msg := rest[1:]
		if msg == "" {
			msg = "not set"
		}
		return "", fmt.Errorf("%s: %s", name, msg)
	}
	return "", fmt.Errorf("${%s}: not a substitution docker compose knows", expr)
}
