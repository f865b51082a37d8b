#!/bin/bash
# The tests labelled `long`, which `make test` leaves out: the soak
# (tests/scripts/test_soak.sh; docs/checkpoint.md, "The soak": 2,000 steps of
# the bundled job at np 3 with about 20 random SIGKILLs and SIGUSR1s and
# automatic resubmission, ending bit-identical to an uninterrupted run, with
# the wall time lost per interruption), bf16 tracking fp32 over 200 steps,
# and the Fashion-MNIST CNN to its accuracy.
#   usage: run.sh BUILD_DIR [OUT_DIR (BUILD_DIR/bench)]
set -eu
build=$1
out=${2:-$build/bench}
mkdir -p "$out"
ctest --test-dir "$build" -L long --output-on-failure --timeout 3600 -V > "$out/long.txt" 2>&1 || status=$?
grep -E "uninterrupted:|soak:|lost per interruption|same:|metrics:|tests passed|Passed|Failed" "$out/long.txt"
exit "${status:-0}"
