#!/usr/bin/env bash
# Prints the oracle's sample, one path a line: scripts/oracle-sample.txt,
# then ../shared/traces/real/*.pickle when that folder exists.
cd "$(dirname "$0")/.."
grep -v '^#' scripts/oracle-sample.txt | sed '/^$/d'
if [ -d ../shared/traces/real ]; then
    ls ../shared/traces/real/*.pickle
fi
