#!/bin/bash
if [ "$(cat /root/copy.txt 2>/dev/null)" = falcon ] && [ -f /root/first.txt ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
