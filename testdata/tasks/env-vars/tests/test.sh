#!/bin/bash
# [environment] env reaches the verifier (GREETING_WORD, GREETING_NAME, its
# host template resolved), and so does [verifier] env (GREETING_FILE).
fail() { echo "$*"; echo 0 > /logs/verifier/reward.txt; exit 0; }
[ -n "$GREETING_WORD" ] || fail "GREETING_WORD is not set"
[ -n "$GREETING_NAME" ] || fail "GREETING_NAME is not set"
case "$GREETING_NAME" in *'$'*) fail "GREETING_NAME is an unresolved template: $GREETING_NAME" ;; esac
[ -n "$GREETING_FILE" ] || fail "GREETING_FILE is not set"
want="$GREETING_WORD, $GREETING_NAME!"
got=$(cat "$GREETING_FILE" 2>&1)
[ "$got" = "$want" ] || fail "$GREETING_FILE: want '$want', got '$got'"
echo "greeting: $got"
echo 1 > /logs/verifier/reward.txt
