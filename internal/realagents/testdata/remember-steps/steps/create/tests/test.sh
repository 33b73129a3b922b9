#!/bin/bash
if [ "$(cat /root/first.txt 2>/dev/null)" = falcon ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
