#!/bin/bash
if [ -s /root/note.txt ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
