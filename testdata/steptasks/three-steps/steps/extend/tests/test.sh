#!/bin/bash
# order: the second line is two; reward: that, and the step's setup ran
# (its script gone from /root).
order=0; reward=0
bash /tests/check.sh 2 two && order=1
if [ $order = 1 ] && [ -f /root/.extend-ready ] && [ ! -e /root/setup.sh ]; then reward=1; fi
echo "{\"reward\": $reward, \"order\": $order}" > /logs/verifier/reward.json
