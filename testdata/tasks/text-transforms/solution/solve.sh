#!/bin/bash
set -e
cd /app
wc -l < input.txt > count.txt
tr '[:lower:]' '[:upper:]' < input.txt > upper.txt
tac input.txt > reversed.txt
