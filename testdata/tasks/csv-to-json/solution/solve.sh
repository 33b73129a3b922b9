#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import csv, json
with open("/app/people.csv", newline="") as f:
    rows = list(csv.DictReader(f))
for r in rows:
    r["age"] = int(r["age"])
with open("/app/people.json", "w") as f:
    json.dump(rows, f, indent=2)
PY
