#!/bin/bash
# [environment] env gives the greeting, [solution] env its punctuation.
printf '%s, %s%s\n' "$GREETING_WORD" "$GREETING_NAME" "$PUNCTUATION" > /app/greeting.txt
