#!/bin/bash
set -e
sort -k1,1 /app/sales.tsv | datamash -g 1 sum 2 > /app/totals.tsv
