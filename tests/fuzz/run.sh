#!/bin/bash
# Builds the libFuzzer harnesses with clang (-fsanitize=fuzzer,address,
# undefined) into BUILD/fuzz and runs each for SECONDS (default 60): first
# every kept regression input (tests/fuzz/regressions/NAME: inputs that once
# crashed), then fuzzing from the seed corpus (tests/fuzz/corpus/NAME, copied:
# the committed seeds stay as they are). A crash is saved into the regression
# directory, to be committed, and fails the run. Prints the executions.
#   usage: run.sh BUILD_DIR [SECONDS] [NAME...]   (default: every harness)
# Harnesses (tests/fuzz/fuzz_NAME.cpp) and the sources each one compiles:
#   config       the INI parser and schema
#   config_files the Accelerate YAML, DeepSpeed and Trainer JSON readers and tables
#   manifest     the checkpoint manifest and attribute decoder
#   safetensors  the safetensors reader
#   token_file   the token file header and reader
#   idx          the Fashion-MNIST IDX reader
#   hf_config    a model directory's config.json as init_from checks it (the Llama's and GPT-2's)
set -eu
build=$(cd "$1" && pwd)
seconds=${2:-60}
shift $(( $# < 2 ? $# : 2 ))
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$build/fuzz
mkdir -p "$out/obj"
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(config config_files manifest safetensors token_file idx hf_config)

torch=$("$root/.venv/bin/python" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2> /dev/null) ||
  { echo "FAIL: no torch in $root/.venv: run make deps" >&2; exit 1; }
mpi_include=$(mpicc --showme:incdirs | tr ' ' '\n' | sed 's/^/-isystem/')
flags=(-std=c++17 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined
       -I"$root/include" -I"$root/src" -I"$here" -I"$build/include" -I"$build/generated"
       -isystem "$torch/include" -isystem "$torch/include/torch/csrc/api/include"
       -isystem /usr/include/hdf5/openmpi $mpi_include)
torch_libs=(-L"$torch/lib" -Wl,-rpath,"$torch/lib" -ltorch_cpu -lc10)
hdf5_libs=(-L/usr/lib/x86_64-linux-gnu/hdf5/openmpi -Wl,-rpath,/usr/lib/x86_64-linux-gnu/hdf5/openmpi
           -lhdf5 $(mpicc --showme:link))
launcher=$(command -v ccache || true)

# compile SOURCE: an object under $out/obj (ccache makes a rerun cheap).
compile() {
  local object=$out/obj/$(echo "${1#$root/}" | tr / _).o
  $launcher clang++ "${flags[@]}" -fsanitize=fuzzer-no-link -c "$1" -o "$object"
  echo "$object"
}

# link NAME SOURCES... -- LIBRARIES...
link() {
  local name=$1 objects=() libraries=()
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do objects+=("$(compile "$1")"); shift; done
  [ $# -gt 0 ] && shift
  libraries=("$@")
  clang++ "${flags[@]}" -fsanitize=fuzzer "${objects[@]}" "${libraries[@]}" -o "$out/fuzz_$name"
}

src=$root/src
# What every harness links of core: the error type and the host name it carries.
core=("$src/core/error.cpp" "$src/core/host_name.cpp")
for name in "${harnesses[@]}"; do
  case $name in
    config) link config "$here/fuzz_config.cpp" "$src"/config/{config,derived,ini_parse,schema,value_text,read_config_file}.cpp \
              "${core[@]}" -- -linih ;;
    config_files) link config_files "$here/fuzz_config_files.cpp" \
                    "$src"/config/{config,derived,ini_parse,schema,value_text,read_config_file,config_files,config_report}.cpp \
                    "$src"/config/{translator,source_leaves,json_source,yaml_source,accelerate_yaml,deepspeed_json}.cpp \
                    "$src"/config/{trainer_fsdp,training_arguments_json}.cpp "${core[@]}" -- -linih -lyaml-cpp ;;
    manifest) link manifest "$here/fuzz_manifest.cpp" \
                "$src"/checkpoint/manifest/{manifest_reader,manifest_codec,shard_record_type}.cpp \
                "$src"/checkpoint/save/shard_table_writer.cpp "$src"/checkpoint/hdf5/{h5_attributes,h5_types}.cpp "${core[@]}" "$src/core/dtype_names.cpp" \
                -- "${hdf5_libs[@]}" "${torch_libs[@]}" ;;
    safetensors) link safetensors "$here/fuzz_safetensors.cpp" "$src/interop/safetensors.cpp" \
                   "${core[@]}" -- "${torch_libs[@]}" ;;
    token_file) link token_file "$here/fuzz_token_file.cpp" "$src/data/token_file.cpp" "${core[@]}" \
                  -- "${torch_libs[@]}" ;;
    idx) link idx "$here/fuzz_idx.cpp" "$src/data/fashion_mnist.cpp" "${core[@]}" \
           -- "${torch_libs[@]}" -lz ;;
    hf_config) link hf_config "$here/fuzz_hf_config.cpp" "$src"/models/hf_architecture.cpp \
                 "$src"/models/families/llama/hf_llama.cpp "$src"/models/families/gpt/hf_gpt2.cpp \
                 "${core[@]}" -- "${torch_libs[@]}" ;;
    *) echo "FAIL: no harness $name" >&2; exit 1 ;;
  esac
done

status=0
for name in "${harnesses[@]}"; do
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
