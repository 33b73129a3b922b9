#!/bin/bash
# The answer is the image's own Debian version, which only the image has.
want=$(cat /etc/debian_version)
if [ -f /root/debian-version.txt ] && [ "$(cat /root/debian-version.txt)" = "$want" ]; then
  echo "debian-version.txt: $want"
  echo 1 > /logs/verifier/reward.txt
else
  echo "debian-version.txt: want $want, got: $(cat /root/debian-version.txt 2>&1)"
  echo 0 > /logs/verifier/reward.txt
fi
