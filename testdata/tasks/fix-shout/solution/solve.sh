#!/bin/bash
cat >/app/shout.py <<'PY'
def shout(text):
    return text.upper() + "!"
PY
