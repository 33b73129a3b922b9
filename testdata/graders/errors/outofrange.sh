#!/bin/sh
echo "{\"pass\": true, \"score\": 1.5}"
