# ctest: timeout 60
# bench/gpu/run.sh --dry-run: the GPU machine's one call, printed without
# running anything. It must name each phase of the real run: the packages
# unpacked into a prefix (not /), the configure against that machine's own
# torch LibTorch with NCCL on, a ninja build of the command, the benchmark
# and the gpu-labelled tests' programs, the benchmark of ours (no-dist, DDP,
# FSDP) beside PyTorch eager on the same batch and sequence, ctest -L gpu,
# and the shipped GPU job; and it must leave no file behind.
source "$(dirname "$0")/lib.sh" "$1"

before=$(cd "$SOURCE_DIR" && git status --porcelain --ignored | sort)
OUT= bash "$SOURCE_DIR/bench/gpu/run.sh" --dry-run > dry.txt 2>&1 || { cat dry.txt; fail "the dry run exited with $?"; }
cat dry.txt
expect_contains dry.txt "unpack_debs: $SOURCE_DIR/bench/gpu/debs/*.deb into /tmp/mpiaccel-gpu-deps"
expect_contains dry.txt "-DCMAKE_PREFIX_PATH=<dirname of python3 torch>"
expect_contains dry.txt "-DMPIACCEL_WITH_NCCL=ON"
expect_contains dry.txt "-DMPI_CXX_COMPILER=/tmp/mpiaccel-gpu-deps/usr/bin/mpicxx.openmpi"
expect_contains dry.txt "--target mpiaccel_tool bench_gpu_gpt <the programs of ctest -N -L gpu>"
for strategy in no ddp fsdp; do
  expect_contains dry.txt "bin/bench_gpu_gpt $strategy 16 1024 20 5"
done
expect_contains dry.txt "bench/gpu/eager_gpt.py 16 1024 20 5"
expect_contains dry.txt "ctest --test-dir $SOURCE_DIR/build-gpu -L gpu"
expect_contains dry.txt "train --config $SOURCE_DIR/jobs/gpt2-small-gpu.ini train.max_steps=30"
after=$(cd "$SOURCE_DIR" && git status --porcelain --ignored | sort)
[ "$before" = "$after" ] || fail "the dry run changed the checkout: $(diff <(echo "$before") <(echo "$after"))"
echo PASS
