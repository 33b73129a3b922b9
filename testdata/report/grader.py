#!/usr/bin/env python3
"""Test grader for report fixtures: passes when the output contains the
case's expected text; a case with metadata.flaky passes only on odd trials,
so its trials disagree (a flaky case); one with metadata.graderCrash makes
the grader fail on trial 2 (a grader error). It returns checks too."""
import json
import sys

case = json.load(sys.stdin)
expected = case.get("expected") or ""
output = case.get("output") or ""
trial = case.get("trial") or 1
meta = case.get("metadata") or {}
if meta.get("graderCrash") and trial == 2:
    sys.stderr.write("grader: simulated failure on trial 2\n")
    sys.exit(1)
contains = expected.lower() in output.lower()
checks = [{"text": "output contains the expected text", "pass": contains,
           "reason": f"looked for {expected!r}"}]
ok = contains
if meta.get("flaky"):
    odd = trial % 2 == 1
    checks.append({"text": "trial number is odd", "pass": odd, "reason": f"trial {trial}"})
    ok = ok and odd
print(json.dumps({
    "pass": ok,
    "score": 1.0 if ok else 0.0,
    "reasoning": f"output {'contains' if contains else 'lacks'} {expected!r} (trial {trial})",
    "checks": checks,
}))
