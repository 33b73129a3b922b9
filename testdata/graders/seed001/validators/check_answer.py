import json, sys
data = json.load(sys.stdin)
output = data.get("output") or ""
checks = []
if "42" in output:
    checks.append({"text": "Output contains correct value (42)", "pass": True, "reason": "42 appears in the output"})
else:
    checks.append({"text": "Output contains correct value (42)", "pass": False, "reason": "42 is missing from the output"})
passed = sum(1 for check in checks if check["pass"])
score = passed / len(checks) if checks else 0.0
print(json.dumps({
    "pass": passed == len(checks),
    "score": score,
    "reason": f"{passed}/{len(checks)} checks passed",
    "checks": checks,
}))
