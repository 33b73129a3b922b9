#!/bin/bash
# grader.sh - Check if output mentions expected keyword

# Read JSON from stdin
INPUT=$(cat)

# Extract fields with jq
OUTPUT=$(echo "$INPUT" | jq -r '.output // ""')
EXPECTED=$(echo "$INPUT" | jq -r '.expected // ""')

# Check if output contains expected (case-insensitive)
if echo "$OUTPUT" | grep -qi "$EXPECTED"; then
  echo '{"pass": true, "score": 1.0, "reasoning": "Contains expected"}'
else
  echo '{"pass": false, "score": 0.0, "reasoning": "Missing expected"}'
fi
