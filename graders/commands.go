package graders

// commandRunner is implemented by the graders that start processes, and
// by those made of other graders.
type commandRunner interface{ runsCommands() bool }

// RunsCommands says whether grading with g starts processes: executables,
// agentv scripts, test suites and command-succeeds assertions, alone or
// inside composites, several -g and per-case lists. Such grading uses the
// machine as an agent does and may read or run the workspace, so a run
// counts it as part of the trial; assertions on the record, JavaScript
// and LLM judges run in harness itself and do not.
func RunsCommands(g Grader) bool {
	c, ok := g.(commandRunner)
	return ok && c.runsCommands()
}

func anyRunsCommands(gs []Grader) bool {
	for _, g := range gs {
		if RunsCommands(g) {
			return true
		}
	}
	return false
}

func (e *executable) runsCommands() bool  { return true }
func (s *script) runsCommands() bool      { return true }
func (g *testsGrader) runsCommands() bool { return true }
func (p *pinned) runsCommands() bool      { return RunsCommands(p.Grader) }
func (n *noting) runsCommands() bool      { return RunsCommands(n.Grader) }
func (c *composite) runsCommands() bool   { return anyRunsCommands(c.graders) }
func (m *many) runsCommands() bool        { return anyRunsCommands(m.gs) }

func (g *assertGrader) runsCommands() bool {
	for _, a := range g.asserts {
		if a.runs {
			return true
		}
	}
	return false
}

func (g *byCase) runsCommands() bool {
	if anyRunsCommands(g.def) {
		return true
	}
	for _, list := range g.cases {
		if anyRunsCommands(list) {
			return true
		}
	}
	return false
}
