#!/bin/bash
# A figure measured beside another run means nothing. The verifier takes
# the benchmark's quiet lock (tests/quiet.py) while it samples the loop
# itself, and scores 1 only when bench.txt holds a figure measured alone,
# with the right prime count, and nobody ran beside the verifier either.
mkdir -p /logs/verifier
reward=0
line=$(cat /app/bench.txt 2>/dev/null)
lock=$(printf '%s\n' "$line" | sed -n 's/.* lock=\([^ :]*\).*/\1/p')
# Without a figure there is nothing to check, and no lock is taken: a
# no-op trial never holds the lock another run's benchmark waits for.
if [ -z "$line" ]; then
	echo "bench.txt: missing"
elif own=$(python3 /tests/quiet.py "${lock:-quiet-bench}" 0.5); then
	case "$line" in
	"quiet lock="*" primes=2262 "*) reward=1 ;;
	*) echo "bench.txt: ${line:-missing}" ;;
	esac
else
	echo "verifier: $own"
fi
echo "$reward" >/logs/verifier/reward.txt
