#!/usr/bin/env bun
// The functional check the suite names: an agentv script grader. It reads
// the grader input on stdin, runs the workspace's tests where the agent
// left them, and answers {pass, score, reason, checks} on stdout.
import { spawnSync } from "node:child_process";

const input = JSON.parse(await Bun.stdin.text());
const cwd: string = input.workspace_path ?? process.env.AGENTV_WORKSPACE_PATH ?? ".";

const checks: Array<{ text: string; pass: boolean; reason: string }> = [];
const tests = spawnSync("bun", ["test"], { cwd, encoding: "utf8" });
const log = `${tests.stdout ?? ""}${tests.stderr ?? ""}`.trim().split("\n");
checks.push({
  text: "bun test",
  pass: tests.status === 0,
  reason: tests.status === 0 ? "the tests pass" : log.slice(-3).join(" | "),
});

const passed = checks.filter((c) => c.pass).length;
console.log(JSON.stringify({
  pass: passed === checks.length,
  score: passed / checks.length,
  reason: `${passed}/${checks.length} checks passed`,
  checks,
}));
