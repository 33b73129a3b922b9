#!/usr/bin/env python3
# A scripted user: asks the agent to echo a line naming the turn and the
# agent's last answer, until turn 4; then it stops.
import json, sys
c = json.load(sys.stdin)
last = c["messages"][-1]
if last["role"] != "agent":
    sys.exit("the last message is not the agent's")
if c["turn"] > 4:
    print(json.dumps({"stop": True, "reason": "done after %d turns" % (c["turn"] - 1)}))
else:
    print("thinking...")  # a line before the reply is fine
    print(json.dumps({"message": "echo t%d<%s>" % (c["turn"], last["content"])}))
