"""Samples a CPU-bound loop (counting the primes below 20000) over a
window while holding the machine's quiet lock, and prints the figure.

The quiet lock is an abstract Unix socket, named after the lock name given,
in the network namespace the process runs in: on the host's network every
process of the machine shares it, and only one can bind the name. A run
that holds it measures alone; one that finds it taken prints "crowded" and
exits 1.

usage: quiet.py LOCK SECONDS
"""

import hashlib
import socket
import sys
import time


def take(name):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind("\0harness-quiet-" + hashlib.sha256(name.encode()).hexdigest()[:20])
    except OSError:
        s.close()
        return None
    return s


def primes(n):
    sieve = bytearray([1]) * n
    sieve[0:2] = b"\0\0"
    for i in range(2, int(n**0.5) + 1):
        if sieve[i]:
            sieve[i * i :: i] = bytearray(len(range(i * i, n, i)))
    return sum(sieve)


def main():
    name, window = sys.argv[1], float(sys.argv[2])
    lock = take(name)
    if lock is None:
        print(f"crowded lock={name}: another run held the quiet lock")
        return 1
    best, count, samples = None, 0, 0
    end = time.monotonic() + window
    while True:
        start = time.perf_counter()
        count = primes(20000)
        took = time.perf_counter() - start
        best = took if best is None else min(best, took)
        samples += 1
        if time.monotonic() >= end:
            break
        time.sleep(0.1)
    print(f"quiet lock={name} primes={count} samples={samples} best_us={int(best * 1e6)}")
    lock.close()
    return 0


sys.exit(main())
