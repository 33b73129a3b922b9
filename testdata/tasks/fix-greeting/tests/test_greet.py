"""Checks /app/greet.py and writes /logs/verifier/ctrf.json and reward.txt."""
import json
import subprocess
import time


def run(name):
    return subprocess.run(["python3", "/app/greet.py", name], capture_output=True, text=True, timeout=20)


def test_greets_ada():
    out = run("Ada")
    assert out.stdout == "Hello, Ada!\n", f"got {out.stdout!r}"


def test_greets_another_name():
    out = run("Grace Hopper")
    assert out.stdout == "Hello, Grace Hopper!\n", f"got {out.stdout!r}"


def test_script_still_in_place():
    with open("/app/greet.py") as f:
        assert "def greet" in f.read(), "greet() is gone"


tests = []
start = int(time.time() * 1000)
for fn in [test_greets_ada, test_greets_another_name, test_script_still_in_place]:
    t0 = time.time()
    entry = {"name": fn.__name__, "status": "passed"}
    try:
        fn()
    except Exception as e:  # a failed check, whatever raised it
        entry["status"] = "failed"
        entry["message"] = str(e) or type(e).__name__
    entry["duration"] = int((time.time() - t0) * 1000)
    print(entry["status"].upper(), fn.__name__, entry.get("message", ""))
    tests.append(entry)
passed = sum(t["status"] == "passed" for t in tests)
report = {"results": {"tool": {"name": "test_greet"}, "summary": {
    "tests": len(tests), "passed": passed, "failed": len(tests) - passed,
    "pending": 0, "skipped": 0, "other": 0, "start": start, "stop": int(time.time() * 1000)},
    "tests": tests}}
with open("/logs/verifier/ctrf.json", "w") as f:
    json.dump(report, f)
with open("/logs/verifier/reward.txt", "w") as f:
    f.write("1\n" if passed == len(tests) else "0\n")
