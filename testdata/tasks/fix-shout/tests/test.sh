#!/bin/bash
# Imports the agent's module where it is (Python caches its bytecode in
# /app/__pycache__), writes what it returns to /app/out.txt and the
# verifier's own cache to /app/.verify-cache: the verifier's files, in the
# working directory beside the agent's, and none of them the agent's
# change.
mkdir -p /logs/verifier /app/.verify-cache
cd /app || exit 1
python3 -c 'import shout; print(shout.shout("hi"))' >/app/out.txt 2>&1
date +%s >/app/.verify-cache/stamp
if [ "$(cat /app/out.txt)" = "HI!" ]; then
	echo "shout(\"hi\") = HI!"
	echo 1 >/logs/verifier/reward.txt
else
	echo "shout(\"hi\") = $(cat /app/out.txt), want HI!"
	echo 0 >/logs/verifier/reward.txt
fi
