#!/bin/bash
set -e
sed -i 's/return "Hello " + name/return "Hello, " + name + "!"/' /app/greet.py
