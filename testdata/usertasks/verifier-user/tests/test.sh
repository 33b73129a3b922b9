#!/bin/bash
# The agent ran as root; the verifier runs as [verifier] user, uid 1234
# (tester), and writes its reward where Harbor's verifier does.
who=$(head -n 1 /app/who.txt 2>/dev/null)
echo "who.txt: $who; verifier: $(id -un) ($(id -Gn))"
if [ "$who" = root ] && [ "$(id -un)" = tester ] && [ "$(id -Gn)" = "tester crew" ]; then
	echo 1 >/logs/verifier/reward.txt
else
	echo 0 >/logs/verifier/reward.txt
fi
