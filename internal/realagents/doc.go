// Package realagents holds end-to-end tests that drive real, unmodified ACP
// agents (Claude Code through @zed-industries/claude-code-acp and its
// successor @agentclientprotocol/claude-agent-acp, Gemini CLI with --acp,
// and Codex through @zed-industries/codex-acp) through the
// capture runner, each pointed at a scripted fake model server from
// testkit/fakemodel on 127.0.0.1, so that they run offline.
//
// The agents are npm packages pinned in testdata/agents/package.json and
// installed by scripts/test. When one is missing its tests are skipped,
// unless HARNESS_REQUIRE_AGENTS is set (as in CI), where they fail.
package realagents
