#!/usr/bin/env python3
# An agentv script grader that asks the target proxy twice; with
# max_calls 1 the second call must be refused. It reports what it saw.
import json, os, sys, urllib.request, urllib.error

data = json.load(sys.stdin)
url = os.environ["AGENTV_TARGET_PROXY_URL"]
token = os.environ["AGENTV_TARGET_PROXY_TOKEN"]

def call(path, payload=None, tok=token):
    body = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(url + path, data=body, method="POST" if payload is not None else "GET",
                                 headers={"Authorization": "Bearer " + tok, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")

s_bad, _ = call("/info", tok="wrong")
s1, r1 = call("/invoke", {"question": "Is this relevant? " + data["output"], "systemPrompt": "Respond with JSON"})
s2, r2 = call("/invoke", {"question": "again"})
s3, info = call("/info")
keys = [k for k in os.environ if k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "JUDGE_KEY")]
rel = json.loads(r1.get("rawText", "{}")).get("relevant") is True
print(json.dumps({
    "pass": rel and s2 == 429,
    "score": 1.0 if rel else 0.0,
    "reason": "relevant" if rel else "not relevant",
    "checks": [
        {"text": "bad token refused", "pass": s_bad == 401},
        {"text": "first call ok", "pass": s1 == 200},
        {"text": "second call over budget", "pass": s2 == 429, "reason": json.dumps(r2)},
        {"text": "info", "pass": info.get("callCount") == 1 and info.get("maxCalls") == 1},
        {"text": "no key in env", "pass": keys == [], "reason": ",".join(keys)},
    ],
}))
