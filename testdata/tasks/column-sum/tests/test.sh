#!/bin/bash
# The expected totals come from datamash, which only the image has.
expected=$(sort -k1,1 /app/sales.tsv | datamash -g 1 sum 2) || { echo "datamash failed"; echo 0 > /logs/verifier/reward.txt; exit 0; }
if [ -f /app/totals.tsv ] && [ "$(cat /app/totals.tsv)" = "$expected" ]; then
  echo "totals match"
  echo 1 > /logs/verifier/reward.txt
else
  echo "totals differ; expected:"; echo "$expected"
  echo 0 > /logs/verifier/reward.txt
fi
