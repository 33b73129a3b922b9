#!/usr/bin/env python3
"""Passes when the agent's output contains the case's expected text.

An executable grader: harness writes one JSON object on stdin (input,
output, expected, trajectory, metadata, ...) and reads one JSON result
from stdout: {"pass": bool, "score": 0..1, "reasoning": str}.
"""
import json
import sys

case = json.load(sys.stdin)
expected = case.get("expected") or ""
output = case.get("output") or ""
ok = expected.lower() in output.lower()
print(json.dumps({
    "pass": ok,
    "score": 1.0 if ok else 0.0,
    "reasoning": f"output {'contains' if ok else 'lacks'} {expected!r}",
}))
