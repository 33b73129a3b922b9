#!/bin/bash
# Wrong on purpose: the dataset's reference check must catch it.
echo 41 > /app/answer.txt
