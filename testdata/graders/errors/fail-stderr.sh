#!/bin/sh
echo "partial"
echo "Traceback: kaboom" >&2
exit 2
