#!/bin/bash
# The agent ran as tester, with tester's groups, and tester owns what it
# wrote; the verifier runs as the image's USER, root.
who=$(tr '\n' ' ' </app/who.txt 2>/dev/null)
owner=$(stat -c %U:%G /app/who.txt 2>/dev/null)
echo "who.txt: $who; owner: $owner; verifier: $(id -un)"
if [ "$who" = "tester tester crew " ] && [ "$owner" = "tester:tester" ] && [ "$(id -u)" = 0 ]; then
	echo 1 >/logs/verifier/reward.txt
else
	echo 0 >/logs/verifier/reward.txt
fi
