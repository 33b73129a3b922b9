#!/bin/sh
/app/bench.sh
