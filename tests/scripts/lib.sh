# Shared helpers of the process-level tests. Source it; $1 of the test is the build dir.
set -u
BUILD_DIR=$(cd "$1" && pwd)
SOURCE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
MPIACCEL="$BUILD_DIR/bin/mpiaccel"
MPIEXEC=${MPIACCEL_MPIEXEC:-mpirun}
default_flags="--oversubscribe --bind-to none"
[ "$(id -u)" = 0 ] && default_flags+=" --allow-run-as-root"
read -r -a MPIEXEC_FLAGS <<< "${MPIACCEL_MPIEXEC_FLAGS:-$default_flags}"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

# The one way the tests launch ranks:
#   mpi [--timeout SECONDS] [--on HOST] NP [MPIRUN-OPTION...] PROGRAM ARGS...
# runs PROGRAM on NP ranks under $MPIEXEC with $MPIEXEC_FLAGS (ctest passes
# CMake's MPIACCEL_MPIEXEC and MPIACCEL_MPIEXEC_FLAGS: tests/CMakeLists.txt)
# and one OpenMP thread per rank.
#   --timeout SECONDS  the job is killed after SECONDS (status 124): for a job
#                      that must end by itself (a killed rank, a crash point)
#   --on HOST          mpirun runs on HOST of the cluster in a box (`on`)
#   MPIRUN-OPTION      a test's own options go between NP and PROGRAM, where
#                      mpirun reads them: -x VAR=VALUE (a variable for every
#                      rank), --mca KEY VALUE, --host/--hostfile ...
mpi() {
  local run=() limit=()
  while :; do
    case $1 in
      --timeout) limit=(timeout "$2"); shift 2 ;;
      --on) run=(on "$2"); shift 2 ;;
      *) break ;;
    esac
  done
  local np=$1
  shift
  "${run[@]}" "${limit[@]}" "$MPIEXEC" "${MPIEXEC_FLAGS[@]}" -np "$np" -x OMP_NUM_THREADS=1 "$@"
}

fail() { echo "FAIL: $*" >&2; exit 1; }
# For a script that checks on after a failure, to report every broken check
# in one run: check_failed records one (FAIL on stderr), and `finish` ends the
# script (PASS and status 0, or status 1 after any check_failed).
FAILED=0
check_failed() { echo "FAIL: $*" >&2; FAILED=1; }
finish() {
  [ "$FAILED" -eq 0 ] && echo "PASS"
  exit "$FAILED"
}
use_ckpt_programs() {  # sets $driver (tests/ckpt_driver) and $tool (mpiaccel), both required
  driver=$BUILD_DIR/tests/ckpt_driver
  tool=$MPIACCEL
  for f in "$tool" "$driver"; do
    [ -x "$f" ] || fail "$f is missing; build targets mpiaccel_tool and ckpt_driver"
  done
}
expect_contains() {  # expect_contains FILE TEXT
  grep -qF -- "$2" "$1" || { echo "--- $1:"; cat "$1"; fail "'$2' not found in $1"; }
}

wait_for_lines() {  # wait_for_lines FILE PATTERN N: until FILE has N lines matching PATTERN (60 s at most)
  for _ in $(seq 1 600); do
    [ -f "$1" ] && [ "$(grep -c -- "$2" "$1")" -ge "$3" ] && return 0
    sleep 0.1
  done
  fail "$1 has fewer than $3 lines matching $2 after 60 s"
}

rank_pids() {  # rank_pids MARK COMMAND: pids of the ranks named COMMAND whose command line has MARK
  pgrep -f -- "$1" | while read -r p; do [ "$(ps -o comm= -p "$p")" = "$2" ] && echo "$p"; done
}

# ---- the cluster in a box (tools/cluster/cluster; the `cluster` tests)
CLUSTER="$SOURCE_DIR/tools/cluster/cluster"
cluster_up() {  # cluster_up ARGS...: up for this test, down when it ends (passed or not)
  cluster_clear
  trap '"$CLUSTER" down > /dev/null 2>&1; rm -rf "$WORK"' EXIT
  MPIACCEL_CLUSTER_OWNER=test "$CLUSTER" up "$@" > cluster-up.txt 2>&1 \
    || { cat cluster-up.txt; fail "cluster up $*"; }
}
cluster_clear() {  # no cluster up: one a killed test left is taken down, one of yours is not
  [ "$(id -u)" = 0 ] || fail "the cluster tests need root (network and UTS namespaces); run them as root, or leave them out with ctest -LE cluster"
  "$CLUSTER" status | grep -q '^no cluster is up' && return 0
  [ "$(cat /run/mpiaccel-cluster/owner 2> /dev/null)" = test ] \
    || fail "a cluster is already up ('$CLUSTER status'): the tests make their own; bring it down first"
  echo "taking down the cluster a killed test left behind"
  "$CLUSTER" down > /dev/null 2>&1
}
on() {  # on HOST COMMAND...: COMMAND on a host of the cluster
  local host=$1
  shift
  "$CLUSTER" run "$host" "$@"
}
# mpirun from node1 over both hosts: mpi2 RANKS_PER_HOST PROGRAM ARGS...
mpi2() {
  local per_host=$1
  shift
  mpi --on node1 $((2 * per_host)) --host "node1:$per_host,node2:$per_host" "$@"
}
job_state() { on node1 scontrol show job "$1" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
submit() {  # submit SBATCH-ARGS...: the job id (sbatch from node1)
  on node1 sbatch --parsable "$@"
}
job_ended() {  # job_ended JOB SECONDS: polls until the job has ended (a requeue is not an end); its state
  local state
  for _ in $(seq 1 $((5 * $2))); do
    state=$(job_state "$1")
    case $state in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE) echo "$state"; return 0 ;; esac
    sleep 0.2
  done
  echo "$state"
}

# The equivalence scripts' training runs (each script defines COMMON, and GPT
# for the errors). train_run NAME NP BATCH MODEL-ARRAY-NAME EXTRA...:
# `mpiaccel train` with the model's arguments, COMMON, the batch and EXTRA,
# writing NAME.jsonl, NAME.ckpt and NAME.out; its output and a failure if it fails.
train_run() {
  local name=$1 np=$2 batch=$3 model="$4[@]"; shift 4
  mpi "$np" "$MPIACCEL" train "${!model}" "${COMMON[@]}" train.batch_size="$batch" "$@" \
    logging.metrics_file="$name.jsonl" checkpoint.dir="$name.ckpt" > "$name.out" 2>&1 \
    || { cat "$name.out"; fail "run $name"; }
}
# expect_train_error NP MESSAGE EXTRA...: one step of the GPT with EXTRA fails, saying MESSAGE.
expect_train_error() {
  local np=$1 message=$2; shift 2
  mpi "$np" "$MPIACCEL" train "${GPT[@]}" "${COMMON[@]}" train.max_steps=1 checkpoint.save_at_end=false "$@" \
    > err.out 2>&1 && fail "expected an error: $message"
  expect_contains err.out "$message"
}

# expect_val_loss_within REFERENCE CANDIDATE BOUND: the last val_loss of
# CANDIDATE.jsonl within BOUND (relative) of REFERENCE.jsonl's.
expect_val_loss_within() {
  /usr/bin/python3 - "$1.jsonl" "$2.jsonl" "$3" <<'PY' || fail "$2's validation loss is not within $3 of $1's"
import json, sys
def val(p): return [r["val_loss"] for r in map(json.loads, open(p)) if "val_loss" in r][-1]
ref, got, bound = val(sys.argv[1]), val(sys.argv[2]), float(sys.argv[3])
print(f"{sys.argv[2]}: val_loss {got:.4f} against {sys.argv[1]}'s {ref:.4f} ({100 * (got - ref) / ref:+.2f} %, bound {bound})")
assert abs(got - ref) <= bound * ref
PY
}
# expect_exact_resume MODEL-ARRAY EXTRA...: 20 steps at np 2 straight, against
# 10 + 10 across a checkpoint (the step-10 one is kept as halves_at_10.ckpt):
# the same step-20 loss and parameters, bit for bit.
expect_exact_resume() {
  local model=$1; shift
  train_run straight 2 16 "$model" train.max_steps=20 "$@"
  train_run halves 2 16 "$model" train.max_steps=10 "$@"
  cp -r halves.ckpt halves_at_10.ckpt
  train_run halves 2 16 "$model" train.max_steps=20 "$@" checkpoint.resume=latest
  expect_contains halves.out "resumed from"
  /usr/bin/python3 - straight.jsonl halves.jsonl <<'PY' || fail "the resumed run differs from the uninterrupted one"
import json, sys
def losses(p): return {r["step"]: r["loss"] for r in map(json.loads, open(p)) if "loss" in r}
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert 20 in a and a[20] == b[20], (a.get(20), b.get(20))
print("resumed run: step 20 loss", b[20], "as the uninterrupted run")
PY
  "$MPIACCEL" ckpt diff straight.ckpt halves.ckpt --atol 0 > resume.diff 2>&1 \
    || { cat resume.diff; fail "parameters differ after the resume"; }
}

# compare_losses A B FIRST LAST TOL: the losses of steps FIRST..LAST in
# A.jsonl and B.jsonl within TOL (relative) of each other.
compare_losses() {
  /usr/bin/python3 - "$1.jsonl" "$2.jsonl" "$3" "$4" "$5" <<'PY' || fail "$2 differs from $1"
import json, sys
def losses(p): return {r["step"]: r["loss"] for r in map(json.loads, open(p)) if "loss" in r}
a, b = losses(sys.argv[1]), losses(sys.argv[2])
steps = range(int(sys.argv[3]), int(sys.argv[4]) + 1)
assert all(s in a and s in b for s in steps), (sorted(a), sorted(b))
worst = max(abs(a[s] - b[s]) / abs(a[s]) for s in steps)
print(f"{sys.argv[2]}: worst loss relative difference {worst:.2e}")
assert worst <= float(sys.argv[5])
PY
}
# expect_backward_gathers_in_group TRACE RANKS: in the Chrome trace of an FSDP
# run with hpZ, on each of RANKS ranks, every all-gather of a unit that starts
# inside a backward span is a group gather ("... in group"), and forward's are not.
expect_backward_gathers_in_group() {
  /usr/bin/python3 - "$1" "$2" <<'PY' || fail "the trace does not show backward's gathers within the group"
import json, sys
spans = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
for rank in range(int(sys.argv[2])):
    mine = [e for e in spans if e["pid"] == rank]
    backward = [e for e in mine if e["name"] == "backward"]
    gathers = [e for e in mine if e["name"].startswith("all_gather ") and "<root>" not in e["name"]]
    def in_backward(g): return any(b["ts"] <= g["ts"] <= b["ts"] + b["dur"] for b in backward)
    late = [g["name"] for g in gathers if in_backward(g)]
    early = [g["name"] for g in gathers if not in_backward(g)]
    assert backward and late and early, (len(backward), len(late), len(early))
    assert all(name.endswith(" in group") for name in late), sorted(set(late))
    assert not any(name.endswith(" in group") for name in early), sorted(set(early))
print(f"hpZ: every backward gather of a unit within the group, forward's over all ranks, on {sys.argv[2]} ranks")
PY
}
# compare_runs REFERENCE CANDIDATE FIRST LAST TOLERANCE [PARAM_TOLERANCE]: two
# `mpiaccel train` runs agree: every loss of steps FIRST..LAST (NAME.jsonl)
# within TOLERANCE relative, and the final checkpoints (NAME.ckpt) within
# PARAM_TOLERANCE (default TOLERANCE) absolute.
compare_runs() {
  compare_losses "$@"
  "$MPIACCEL" ckpt diff "$1.ckpt" "$2.ckpt" --atol "${6:-$5}" > "$2.diff" 2>&1 \
    || { cat "$2.diff"; fail "$2 parameters differ from $1"; }
}
