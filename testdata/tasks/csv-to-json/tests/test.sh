#!/bin/bash
# As Terminal-Bench 2.0's verifiers do: pytest runs the checks in
# test_outputs.py (capturing each test's output), and the reward is 1 when
# they all pass. The field's install pytest with uvx; this image has
# Debian's python3-pytest.
python3 -m pytest /tests/test_outputs.py -rA

if [ $? -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
