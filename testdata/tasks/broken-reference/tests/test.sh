#!/bin/bash
if [ "$(cat /app/answer.txt 2>/dev/null)" = "42" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo "answer.txt: $(cat /app/answer.txt 2>&1)"
  echo 0 > /logs/verifier/reward.txt
fi
