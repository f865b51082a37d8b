# ctest: timeout 1500
# The front door, as a user meets it: install the build into a temporary
# prefix, move the prefix (the package is relocatable), check that it names
# no path of the source or build tree, build a program with pkg-config and
# each example under examples/ with find_package(mpiaccel) against that
# prefix alone, and run them: run_main's failure contract; custom_loop,
# custom_trainer and fsdp_own_model learn and reproduce np 1 at np 2 and 3
# within 1e-5, tp_own_model at tp 2 and tp 2 × dp_shard 2, pp_own_model at pp 2 (1f1b, zb_h1) and pp 2 × dp 2; custom_trainer is pre-empted and resumes exactly; comm_hook (a top-k hook of the user's own) learns at np 2.
source "$(dirname "$0")/lib.sh" "$1"
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

# ---- install ---------------------------------------------------------------
cmake --install "$BUILD_DIR" --prefix "$WORK/staged" > install.out 2>&1 || { cat install.out; fail "cmake --install"; }
mv "$WORK/staged" "$WORK/prefix"
P="$WORK/prefix"
for f in include/mpiaccel/mpiaccel.hpp include/mpiaccel/version.hpp include/mpiaccel/trainer.hpp \
         include/mpiaccel/program.hpp lib/libmpiaccel.so bin/mpiaccel \
         lib/cmake/mpiaccel/mpiaccelConfig.cmake lib/cmake/mpiaccel/mpiaccelConfigVersion.cmake \
         lib/cmake/mpiaccel/mpiaccelTargets.cmake lib/pkgconfig/mpiaccel.pc; do
  [ -e "$P/$f" ] || fail "the install has no $f"
done
[ -z "$(find "$P" -name 'libmpiaccel_*.a')" ] || fail "module archives were installed: $(find "$P" -name 'libmpiaccel_*.a')"
[ -z "$(find "$P/include" -path '*/src/*')" ] || fail "internal headers were installed"
# The one tree path it may name is where the LibTorch it was built with lies,
# when that is in the tree (the torch wheel and its NCCL in .venv's
# site-packages).
torch_dir=$(sed -n 's/^Torch_DIR:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt")
torch_root=$(realpath -m "$torch_dir/../../../..")
leaks=$(for f in $(grep -rlF -e "$SOURCE_DIR" -e "$BUILD_DIR" "$P"); do
          TORCH_ROOT=$torch_root perl -pe 's/\Q$ENV{TORCH_ROOT}\E//g' "$f" |
            grep -aqF -e "$SOURCE_DIR" -e "$BUILD_DIR" && echo "$f"
        done || true)
[ -z "$leaks" ] || fail "installed files name the source or build tree: $leaks"
"$P/bin/mpiaccel" --version > version.txt 2>&1 || { cat version.txt; fail "installed mpiaccel --version"; }
expect_contains version.txt "mpiaccel 0.3"
mpi 2 "$P/bin/mpiaccel" env > env.txt 2>&1 || { cat env.txt; fail "installed mpiaccel env"; }
expect_contains env.txt "mpiaccel 0.3"
# Which LibTorch, and whether it has CUDA: the wheel's has, Debian's has not.
grep -Eq "LibTorch +[0-9]+\.[0-9]+[^ ]*, with(out)? CUDA" env.txt || { cat env.txt; fail "env: LibTorch line"; }
if grep -q "^Torch_DIR.*site-packages" "$BUILD_DIR/CMakeCache.txt"; then
  expect_contains env.txt "with CUDA"
else
  expect_contains env.txt "without CUDA"
fi

# ---- pkg-config, and run_main's contract --------------------------------------
export PKG_CONFIG_PATH="$P/lib/pkgconfig"
[ "$(pkg-config --modversion mpiaccel)" = "$(sed -n 's/^mpiaccel //p' version.txt)" ] || fail "pkg-config version"
# shellcheck disable=SC2046
g++ -O1 -o contract "$SOURCE_DIR/tests/install/run_main_contract.cpp" $(pkg-config --cflags --libs mpiaccel) \
  > contract.build 2>&1 || { cat contract.build; fail "building with pkg-config"; }
mpi 2 ./contract distributed.strategy=ddp > ok.out 2>&1 || { cat ok.out; fail "contract program"; }
expect_contains ok.out "on 2 rank(s), strategy ddp"
mpi 2 ./contract distributed.strategy=ddp -- exit 7 > exit.out 2>&1
[ $? = 7 ] || { cat exit.out; fail "the body's exit status is not main's"; }
mpi 2 ./contract --bogus > usage.out 2>&1
[ $? = 2 ] || { cat usage.out; fail "a wrong command line must exit 2"; }
[ "$(grep -c "unexpected argument '--bogus'" usage.out)" = 1 ] || { cat usage.out; fail "usage error not printed once"; }
mpi 2 ./contract distributed.strategy=ddp -- throw-on all > all.out 2>&1
[ $? = 1 ] || { cat all.out; fail "every rank failing must exit 1"; }
[ "$(grep -c "contract: the user's code failed on purpose" all.out)" = 1 ] || { cat all.out; fail "a shared failure is printed once"; }
start=$SECONDS
mpi 2 ./contract distributed.strategy=ddp distributed.timeout_s=60 -- throw-on 1 > one.out 2>&1
status=$?
[ "$status" = 1 ] || { cat one.out; fail "one failing rank must end the job with status 1, got $status"; }
[ $((SECONDS - start)) -lt 40 ] || fail "one failing rank took $((SECONDS - start)) s to end the job"
grep -q "rank 1.*contract failed on this rank: the user's code failed on purpose" one.out \
  || { cat one.out; fail "the failing rank's one-line message"; }
mpi 2 ./contract > strategy_no.out 2>&1
[ $? = 1 ] || fail "two ranks with strategy = no must fail"
expect_contains strategy_no.out "set strategy = ddp"

# ---- find_package: the version, then each example ---------------------------
mkdir -p too_new && cat > too_new/CMakeLists.txt <<'EOF'
cmake_minimum_required(VERSION 3.18)
project(too_new LANGUAGES CXX)
find_package(mpiaccel 0.4 REQUIRED)
EOF
cmake -S too_new -B too_new/build -DCMAKE_PREFIX_PATH="$P" > too_new.out 2>&1 && fail "find_package(mpiaccel 0.4) accepted 0.3"
build_example() {  # build_example NAME
  cmake -S "$SOURCE_DIR/examples/$1" -B "ex_$1" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_BUILD_TYPE=Release \
    "${launcher[@]}" > "ex_$1.cmake" 2>&1 || { cat "ex_$1.cmake"; fail "configuring example $1"; }
  cmake --build "ex_$1" -j 2 > "ex_$1.build" 2>&1 || { cat "ex_$1.build"; fail "building example $1"; }
  ! grep -q "warning:" "ex_$1.build" || { grep "warning:" "ex_$1.build"; fail "example $1 builds with warnings"; }
}
for ex in custom_loop custom_trainer fsdp_own_model tp_own_model pp_own_model comm_hook; do build_example "$ex"; done

# Losses of two runs, step by step, within 1e-5 relative; the mean of the
# last five logged losses below `learned` times that of the first five.
compare_losses() {  # compare_losses REFERENCE CANDIDATE LEARNED
  /usr/bin/python3 - "$@" <<'PY' || fail "$2 does not reproduce $1"
import json, re, sys
def losses(path):
    if path.endswith(".jsonl"):
        return {r["step"]: r["loss"] for r in map(json.loads, open(path)) if "loss" in r}
    return {int(m[1]): float(m[2]) for m in re.finditer(r"^step (\d+) loss (\S+)$", open(path).read(), re.M)}
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert a and sorted(a) == sorted(b), (sorted(a), sorted(b))
worst = max(abs(a[s] - b[s]) / abs(a[s]) for s in a)
steps = sorted(a)
first = sum(a[s] for s in steps[:5]) / len(steps[:5])
last = sum(a[s] for s in steps[-5:]) / len(steps[-5:])
print(f"{sys.argv[2]}: {len(a)} steps, worst relative difference {worst:.1e}; loss {first:.4f} -> {last:.4f}")
assert worst <= 1e-5, worst
assert last < float(sys.argv[3]) * first, (first, last)
PY
}
same_parameters() {  # same_parameters CKPT_A CKPT_B
  "$P/bin/mpiaccel" ckpt diff "$1" "$2" --atol 1e-5 > "$2.diff" 2>&1 || { cat "$2.diff"; fail "$2 parameters differ from $1"; }
}

# custom_loop: no config file; a global batch of 24 split over the ranks.
for np in 1 2 3; do
  strategy=ddp; [ "$np" = 1 ] && strategy=no
  mpi $np ex_custom_loop/custom_loop distributed.strategy=$strategy train.batch_size=$((24 / np)) \
    train.max_steps=60 checkpoint.dir=loop_np$np > loop_np$np.out 2>&1 || { cat loop_np$np.out; fail "custom_loop np $np"; }
done
for np in 2 3; do compare_losses loop_np1.out loop_np$np.out 0.5; same_parameters loop_np1 loop_np$np; done

# custom_trainer: its job.ini as shipped, with the run's files redirected.
TJOB="$SOURCE_DIR/examples/custom_trainer/job.ini"
TRAINER_MPI=()  # extra mpirun arguments of the next trainer_run (an -x VAR=VALUE)
trainer_run() {  # trainer_run NAME NP [overrides...]
  local name=$1 np=$2; shift 2
  mpi "$np" "${TRAINER_MPI[@]}" ex_custom_trainer/custom_trainer --config "$TJOB" train.batch_size=$((32 / np)) \
    logging.metrics_file=$name.jsonl checkpoint.dir=$name.ck logging.progress=lines "$@"
}
SHORT=(train.max_steps=40 train.log_every=1 train.eval_every=20)
trainer_run short_np1 1 distributed.strategy=no "${SHORT[@]}" > short_np1.out 2>&1 || { cat short_np1.out; fail "custom_trainer np 1"; }
trainer_run short_np2 2 "${SHORT[@]}" > short_np2.out 2>&1 || { cat short_np2.out; fail "custom_trainer np 2"; }
compare_losses short_np1.jsonl short_np2.jsonl 0.9
same_parameters short_np1.ck short_np2.ck
trainer_run trainer_np2 2 > trainer_np2.out 2>&1 || { cat trainer_np2.out; fail "custom_trainer np 2, as shipped"; }
/usr/bin/python3 - trainer_np2.jsonl <<'PY' || fail "custom_trainer did not learn to classify"
import json, sys
acc = [r["val_acc"] for r in map(json.loads, open(sys.argv[1])) if "val_acc" in r]
print(f"custom_trainer val_acc: {acc}")
assert acc and acc[-1] > 0.9, acc
PY

# Pre-empt custom_trainer's np 2 run with SIGUSR1 to rank 1, then resume it.
# The run takes well under a second: rank 1 pauses 10 s before step 100
# (MPIACCEL_TEST_STALL), so the signal, sent once step 80 is logged, reaches
# the run before it can end.
TRAINER_MPI=(-x MPIACCEL_TEST_STALL=1:100:10)
trainer_run preempt 2 checkpoint.every_steps=0 > preempt.out 2>&1 &
job=$!
TRAINER_MPI=()
wait_for_lines preempt.jsonl '"loss"' 8
ranks=($(rank_pids logging.metrics_file=preempt.jsonl custom_trainer))
[ "${#ranks[@]}" = 2 ] || fail "expected 2 custom_trainer ranks, found ${ranks[*]}"
kill -USR1 "${ranks[1]}"
wait "$job"
status=$?
[ "$status" = 3 ] || { cat preempt.out; fail "pre-empted custom_trainer exited $status, expected 3"; }
saved=$(sed -n 's/.*step_0*\([0-9]*\)\.h5.*/\1/p' preempt.ck/latest)
[ -n "$saved" ] || fail "no checkpoint after the pre-emption"
trainer_run preempt 2 checkpoint.every_steps=0 > resumed.out 2>&1 || { cat resumed.out; fail "resuming custom_trainer"; }
expect_contains resumed.out "at step $saved"
/usr/bin/python3 - "$saved" trainer_np2.jsonl preempt.jsonl <<'PY' || fail "the resumed run does not continue the uninterrupted one"
import json, sys
saved = int(sys.argv[1])
straight, rows = {}, [r for r in map(json.loads, open(sys.argv[3])) if "loss" in r]
for r in map(json.loads, open(sys.argv[2])):
    if "loss" in r: straight[r["step"]] = r["loss"]
got = {r["step"]: r["loss"] for r in rows}
assert max(got) == 300 and min(got) <= saved < max(got), (saved, sorted(got))
for step, loss in got.items():
    assert abs(loss - straight[step]) <= 1e-12 * abs(straight[step]), (step, loss, straight[step])
print(f"custom_trainer pre-empted after step {saved}; the resumed losses equal the uninterrupted run's")
PY

# comm_hook: a top-k hook of the user's own, on DDP at np 2: it sends a tenth
# of the gradients and still learns (error feedback keeps what it held back).
mpi 2 ex_comm_hook/comm_hook distributed.strategy=ddp train.batch_size=12 train.max_steps=120 \
  checkpoint.dir=hook_np2 > hook_np2.out 2>&1 || { cat hook_np2.out; fail "comm_hook np 2"; }
expect_contains hook_np2.out "top-k hook: sent"
/usr/bin/python3 - hook_np2.out <<'PY' || fail "comm_hook did not learn"
import re, sys
text = open(sys.argv[1]).read()
loss = [float(m) for m in re.findall(r"^step \d+ loss (\S+)$", text, re.M)]
sent, whole = map(int, re.search(r"sent (\d+) of (\d+)", text).groups())
print(f"comm_hook: loss {sum(loss[:5]) / 5:.4f} -> {sum(loss[-5:]) / 5:.4f}, sent {sent} of {whole}")
assert sum(loss[-5:]) < 0.5 * sum(loss[:5]), loss
assert 0 < sent <= 0.11 * whole, (sent, whole)
PY

# fsdp_own_model: FSDP units and activation checkpointing, np 1, 2, 3.
for np in 1 2 3; do
  mpi $np ex_fsdp_own_model/fsdp_own_model --config "$SOURCE_DIR/examples/fsdp_own_model/fsdp.ini" \
    train.batch_size=$((24 / np)) train.max_steps=60 train.log_every=1 logging.metrics_file=fsdp_np$np.jsonl \
    checkpoint.dir=fsdp_np$np logging.progress=off > fsdp_np$np.out 2>&1 || { cat fsdp_np$np.out; fail "fsdp_own_model np $np"; }
done
for np in 2 3; do compare_losses fsdp_np1.jsonl fsdp_np$np.jsonl 0.7; same_parameters fsdp_np1 fsdp_np$np; done

# example_run EXAMPLE INI NAME NP EXTRA...: examples/EXAMPLE with its INI for 60 steps.
example_run() {
  local example=$1 ini=$2 name=$3 np=$4; shift 4
  mpi $np ex_$example/$example --config "$SOURCE_DIR/examples/$example/$ini" train.max_steps=60 \
    train.log_every=1 logging.metrics_file=$name.jsonl checkpoint.dir=$name logging.progress=off "$@" \
    > $name.out 2>&1 || { cat $name.out; fail "$example $name"; }
}

# tp_own_model: the plan splits each block's MLP; np 1 (tp 1), tp 2, tp 2 × dp_shard 2 under fsdp.
tp_run() { example_run tp_own_model tp.ini "$@"; }
tp_run tp_np1 1 parallelism.tp_size=1 train.batch_size=24
tp_run tp_tp2 2 train.batch_size=24
expect_contains tp_tp2.out "tensor parallelism: 8 layers split over 2 ranks"
tp_run tp_tp2_shard2 4 distributed.strategy=fsdp train.batch_size=12
for r in tp_tp2 tp_tp2_shard2; do compare_losses tp_np1.jsonl $r.jsonl 0.7; same_parameters tp_np1 $r; done

# pp_own_model: the model declares its pieces; np 1 (pp 1), pp 2 (1f1b, 4
# microbatches), pp 2 × dp 2 under ddp, and pp 2 under zb_h1.
pp_run() { example_run pp_own_model pp.ini "$@"; }
pp_run pp_np1 1 parallelism.pp_size=1 train.batch_size=24
pp_run pp_pp2 2 train.batch_size=24
expect_contains pp_pp2.out "(layers 0-1, the first piece) of 2, schedule 1f1b, 4 microbatches"
pp_run pp_pp2_dp2 4 train.batch_size=12 parallelism.pp_microbatches=2
pp_run pp_pp2_zb 2 train.batch_size=24 parallelism.pp_schedule=zb_h1
for r in pp_pp2 pp_pp2_dp2 pp_pp2_zb; do compare_losses pp_np1.jsonl $r.jsonl 0.7; same_parameters pp_np1 $r; done
echo PASS
