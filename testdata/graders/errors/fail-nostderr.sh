#!/bin/sh
echo "output lacks the answer"
exit 1
