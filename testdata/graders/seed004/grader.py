#!/usr/bin/env python3
"""
Grader that checks if output contains expected answer.
Make executable: chmod +x grader.py
"""
import json
import sys

# Read input from stdin
data = json.load(sys.stdin)

# Extract fields
output = data.get("output", "").lower()
expected = (data.get("expected") or "").lower()

# Scoring logic
pass_result = expected in output if expected else True

# Write result to stdout
print(json.dumps({
    "pass": pass_result,
    "score": 1.0 if pass_result else 0.0,
    "reasoning": "Contains expected" if pass_result else "Missing expected"
}))
