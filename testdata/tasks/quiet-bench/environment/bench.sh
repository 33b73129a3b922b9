#!/bin/sh
# Samples a CPU-bound loop for 1.5 s and writes the figure to
# /app/bench.txt. A figure measured beside another run means nothing, so
# the sampling holds the machine's quiet lock (quiet.py), named by
# HARNESS_QUIET_LOCK (default quiet-bench), and the figure says "crowded"
# when another run holds it.
exec python3 /app/quiet.py "${HARNESS_QUIET_LOCK:-quiet-bench}" 1.5 >/app/bench.txt
