#!/bin/sh
# Hangs; its child too, so only a process-group kill ends both.
sleep 300 &
echo $! > "${HANG_PIDFILE:-/dev/null}"
sleep 300
