#!/bin/bash
# Shared by the steps: "check N WORD" says whether /root/state.txt has N
# lines, the last of them WORD.
lines=$(wc -l < /root/state.txt 2>/dev/null || echo 0)
last=$(tail -n 1 /root/state.txt 2>/dev/null)
echo "state.txt: $lines lines, the last \"$last\" (want $1, \"$2\")" >&2
[ "$lines" = "$1" ] && [ "$last" = "$2" ]
