#!/bin/bash
# One reward per part, in reward.json: the score is their mean.
cd /app
score() { if [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; then echo 1; else echo 0; fi; }
count=$(score count.txt "$(wc -l < input.txt)")
upper=$(score upper.txt "$(tr '[:lower:]' '[:upper:]' < input.txt)")
reversed=$(score reversed.txt "$(tac input.txt)")
echo "count=$count upper=$upper reversed=$reversed"
printf '{"count": %s, "upper": %s, "reversed": %s}\n' "$count" "$upper" "$reversed" > /logs/verifier/reward.json
