#!/usr/bin/env bash
# `make bench`: runs every benchmark, bench/*/run.sh but bench/gpu (which runs
# on a GPU machine), each given the build directory, and prints their
# tables. A benchmark that fails does not stop the
# others; the exit status is 1 if any failed.
#
#   bench/run_all.sh BUILD_DIR
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: bench/run_all.sh BUILD_DIR}
[ -d "$build" ] || { echo "bench: build directory $build not found: run make build first" >&2; exit 1; }
build=$(cd "$build" && pwd)

failed=()
ran=0
for script in "$here"/*/run.sh; do
  [ -e "$script" ] || continue
  name=$(basename "$(dirname "$script")")
  # bench/gpu/run.sh is the GPU machine's one call (docs/benchmarks.md).
  [ "$name" = gpu ] && continue
  echo "=== bench/$name ==="
  start=$SECONDS
  if bash "$script" "$build"; then
    echo "=== bench/$name: done in $((SECONDS - start)) s ==="
  else
    echo "=== bench/$name: FAILED (exit $?) after $((SECONDS - start)) s ===" >&2
    failed+=("$name")
  fi
  ran=$((ran + 1))
  echo
done
if ((ran == 0)); then
  echo "bench: no bench/*/run.sh found under $here" >&2
  exit 1
fi
if ((${#failed[@]})); then
  echo "bench: ${#failed[@]} of $ran benchmark(s) failed: ${failed[*]}" >&2
  exit 1
fi
echo "bench: $ran benchmark(s) ran; CSVs are in $build/bench/"
