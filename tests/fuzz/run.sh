#!/bin/bash
# Builds the libFuzzer harnesses with clang (-fsanitize=fuzzer,address,
# undefined) into BUILD/fuzz and runs each for SECONDS (default 60): first
# every kept regression input (tests/fuzz/regressions/NAME: inputs that once
# crashed), then fuzzing from the seed corpus (tests/fuzz/corpus/NAME, copied:
# the committed seeds stay as they are). A crash is saved into the regression
# directory, to be committed, and fails the run. Prints the executions.
#   usage: run.sh BUILD_DIR [SECONDS]
set -eu
build=$(cd "$1" && pwd)
seconds=${2:-60}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$build/fuzz
mkdir -p "$out"
flags=(-std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I"$root/include" -I"$root/src")
config_sources=("$root"/src/config/{config,derived,error,ini_parse,schema,value_text}.cpp)
clang++ "${flags[@]}" "$here/fuzz_config.cpp" "${config_sources[@]}" -linih -o "$out/fuzz_config"
status=0
for name in config; do
  regressions=$here/regressions/$name
  mkdir -p "$regressions"
  if [ -n "$(ls -A "$regressions")" ]; then
    "$out/fuzz_$name" "$regressions"/* > "$out/$name.regressions.log" 2>&1 ||
      { echo "FAIL: fuzz_$name crashes on a kept regression input" >&2; tail -20 "$out/$name.regressions.log" >&2; status=1; }
  fi
  corpus=$out/corpus_$name
  rm -rf "$corpus"
  cp -r "$here/corpus/$name" "$corpus"
  if "$out/fuzz_$name" "$corpus" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
       -artifact_prefix="$regressions/" -print_final_stats=1 > "$out/$name.log" 2>&1; then
    echo "fuzz_$name: $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/$name.log" | grep -o '[0-9]*$') executions in ${seconds} s, no crash; corpus $(ls "$corpus" | wc -l) inputs"
  else
    echo "FAIL: fuzz_$name found a crash, kept in $regressions:" >&2
    grep -E "ERROR|runtime error|==ABORTING|uncaught|Test unit written" "$out/$name.log" | head -10 >&2
    status=1
  fi
done
exit $status
