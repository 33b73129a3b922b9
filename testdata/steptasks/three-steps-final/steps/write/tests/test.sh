#!/bin/bash
if bash /tests/check.sh 1 one; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
