#!/bin/bash
echo "answer: $(cat /app/answer.txt 2>/dev/null)"
if [ "$(cat /app/answer.txt 2>/dev/null)" = reviewed ]; then echo 1; else echo 0; fi >/logs/verifier/reward.txt
