#!/bin/bash
if bash /tests/check.sh 3 three; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
