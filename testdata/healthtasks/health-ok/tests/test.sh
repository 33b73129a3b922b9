#!/bin/bash
# The healthcheck ran twice, in this layer, before the agent.
echo "healthcheck runs: $(cat /tmp/hc)"
if [ "$(cat /tmp/hc)" = 2 ]; then echo 1; else echo 0; fi >/logs/verifier/reward.txt
