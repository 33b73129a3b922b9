#!/bin/bash
# Runs the checks in test_greet.py; each writes a CTRF entry, and the
# reward is 1 only when all pass.
python3 /tests/test_greet.py
