# ctest: timeout 300
# Every job script under jobs/ runs here, so none can rot: in dry-run mode
# (MPIACCEL_DRY_RUN=1, commands printed) inside a synthetic Slurm allocation,
# and for real with stub srun/mpirun/scontrol on PATH and a stub trainer, to
# exercise the requeue branch (trainer status 3) and the SIGUSR1 forwarding of
# the mpirun script. jobs/local/train.sh also runs a real short training.
source "$(dirname "$0")/lib.sh" "$1"

JOBS="$SOURCE_DIR/jobs"
STUBS=$WORK/stubs
mkdir -p "$STUBS"

# Stub launchers: log the command line, then run the program part (from the
# trainer binary on) as a single rank. Like mpirun, stub mpirun forwards
# SIGUSR1 to its child; like srun, both exit with the child's status.
for launcher in srun mpirun; do
  cat > "$STUBS/$launcher" << EOF
#!/bin/bash
echo "$launcher \$*" >> "$WORK/calls.log"
while [ \$# -gt 0 ] && [ "\$1" != "\$MPIACCEL" ]; do shift; done
[ \$# -gt 0 ] || { echo "stub $launcher: no program \$MPIACCEL in its arguments" >&2; exit 99; }
"\$@" &
child=\$!
trap 'kill -USR1 \$child' USR1
# A trapped signal interrupts wait; bash keeps the child's status for the
# last wait.
while kill -0 \$child 2> /dev/null; do wait \$child; done
wait \$child
EOF
done
cat > "$STUBS/scontrol" << EOF
#!/bin/bash
echo "scontrol \$*" >> "$WORK/calls.log"
EOF
# The trainer: exits STUB_STATUS at once, or with STUB_WAIT_USR1=1 waits for
# SIGUSR1 and then exits 3 like a pre-empted `mpiaccel train`.
cat > "$STUBS/trainer" << EOF
#!/bin/bash
echo "trainer \$*" >> "$WORK/calls.log"
if [ "\${STUB_WAIT_USR1:-0}" = 1 ]; then
  trap 'echo "trainer got USR1" >> "$WORK/calls.log"; exit 3' USR1
  touch "$WORK/trainer.started"
  for _ in \$(seq 600); do sleep 0.1; done
  exit 1
fi
exit "\${STUB_STATUS:-0}"
EOF
chmod +x "$STUBS"/*

slurm_env=(SLURM_JOB_ID=4242 SLURM_JOB_NAME=t SLURM_JOB_NUM_NODES=2 SLURM_NNODES=2 SLURM_NTASKS=8
           SLURM_NTASKS_PER_NODE=4 SLURM_TASKS_PER_NODE='4(x2)' SLURM_CPUS_PER_TASK=8)
job() {  # job SCRIPT ARGS...: runs a job script as Slurm would, in $WORK, stubs first on PATH
  env -u OMP_NUM_THREADS "${slurm_env[@]}" PATH="$STUBS:$PATH" MPIACCEL="$STUBS/trainer" CONFIG=run.ini \
    bash "$@"
}

# --- Every script: syntax, and the #SBATCH lines the docs promise ----------
for script in "$JOBS"/slurm/*.sbatch "$JOBS"/local/*.sh; do
  bash -n "$script" || fail "$script: syntax error"
  [ -x "$script" ] || fail "$script is not executable"
done
for script in "$JOBS"/slurm/*.sbatch; do
  for directive in --nodes= --ntasks-per-node= --gpus-per-node= --cpus-per-task= --time= --requeue \
                   --signal=; do
    grep -q "^#SBATCH $directive" "$script" || fail "$script: no '#SBATCH $directive'"
  done
done
grep -qx "#SBATCH --signal=USR1@90" "$JOBS/slurm/train-srun.sbatch" || fail "srun script: the ranks must get USR1"
grep -qx "#SBATCH --signal=B:USR1@90" "$JOBS/slurm/train-mpirun.sbatch" || fail "mpirun script: the shell must get USR1"

# --- Dry runs: the commands, nothing executed -----------------------------
for script in "$JOBS"/slurm/*.sbatch; do
  name=$(basename "$script")
  rm -f calls.log
  MPIACCEL_DRY_RUN=1 NCCL_DEBUG=INFO job "$script" train.max_steps=7 > "$name.out" 2> "$name.err" ||
    { cat "$name.out" "$name.err"; fail "$name: dry run failed"; }
  [ ! -e calls.log ] || fail "$name: the dry run executed $(cat calls.log)"
  expect_contains "$name.out" "--config run.ini checkpoint.dir=runs/t-4242/checkpoints checkpoint.resume=latest logging.metrics_file=runs/t-4242/metrics.jsonl train.max_steps=7"
  expect_contains "$name.out" "finished"
  grep -q "scontrol" "$name.out" && fail "$name: requeue after a finished run"
  # Pre-empted (3): requeue; failed (1): no requeue, the status is the job's.
  MPIACCEL_DRY_RUN=1 MPIACCEL_DRY_RUN_STATUS=3 job "$script" > out.txt 2>&1
  status=$?
  [ "$status" = 3 ] || fail "$name: dry run of a pre-empted run exited $status"
  expect_contains out.txt "+ scontrol requeue 4242"
  MPIACCEL_DRY_RUN=1 MPIACCEL_DRY_RUN_STATUS=1 job "$script" > out.txt 2>&1
  status=$?
  [ "$status" = 1 ] || fail "$name: dry run of a failed run exited $status"
  grep -q "scontrol" out.txt && fail "$name: requeue after a failure"
done
expect_contains train-srun.sbatch.out "+ srun --mpi=pmix -K1 --cpu-bind=cores --cpus-per-task=8 $STUBS/trainer train"
expect_contains train-mpirun.sbatch.out "+ mpirun -np 8 --map-by ppr:4:node:PE=8 --bind-to core -x OMP_NUM_THREADS"
expect_contains train-mpirun.sbatch.out " -x NCCL_DEBUG "

# --- Real runs with stubs: the requeue branch -----------------------------
for script in "$JOBS"/slurm/*.sbatch; do
  name=$(basename "$script")
  rm -f calls.log
  STUB_STATUS=3 job "$script" > out.txt 2>&1
  status=$?
  [ "$status" = 3 ] || { cat out.txt; fail "$name: pre-empted trainer, job exited $status"; }
  expect_contains calls.log "trainer train --config run.ini"
  expect_contains calls.log "checkpoint.resume=latest"
  expect_contains calls.log "scontrol requeue 4242"
  [ -d runs/t-4242 ] || fail "$name: no run directory"

  rm -f calls.log
  STUB_STATUS=0 job "$script" > out.txt 2>&1 || { cat out.txt; fail "$name: finished trainer, job failed"; }
  grep -q scontrol calls.log && fail "$name: requeued a finished run"

  rm -f calls.log
  STUB_STATUS=1 job "$script" > out.txt 2>&1
  [ $? = 1 ] || fail "$name: failed trainer, job did not exit 1"
  grep -q scontrol calls.log && fail "$name: requeued a failed run"

  # Too many restarts: no endless requeue loop.
  rm -f calls.log
  SLURM_RESTART_COUNT=20 STUB_STATUS=3 job "$script" > out.txt 2>&1
  [ $? = 3 ] || fail "$name: restart limit, job did not exit 3"
  grep -q scontrol calls.log && fail "$name: requeued past MAX_RESTARTS"
  expect_contains out.txt "not requeueing"
done

# --- SIGUSR1 to the batch shell of the mpirun script (--signal=B:USR1) -----
# reaches the trainer through mpirun; its status 3 requeues the job.
rm -f calls.log trainer.started
# A plain command in the background (not the job function), so $! is the
# batch shell itself.
env -u OMP_NUM_THREADS "${slurm_env[@]}" PATH="$STUBS:$PATH" MPIACCEL="$STUBS/trainer" CONFIG=run.ini \
  STUB_WAIT_USR1=1 bash "$JOBS/slurm/train-mpirun.sbatch" > usr1.txt 2>&1 &
shell=$!
for _ in $(seq 300); do [ -e trainer.started ] && break; sleep 0.1; done
[ -e trainer.started ] || fail "the stub trainer did not start"
kill -USR1 "$shell"
wait "$shell"
status=$?
[ "$status" = 3 ] || { cat usr1.txt calls.log; fail "USR1 to the mpirun job: exit $status, expected 3"; }
expect_contains usr1.txt "batch shell: SIGUSR1"
expect_contains calls.log "trainer got USR1"
expect_contains calls.log "scontrol requeue 4242"

# --- jobs/local/train.sh --------------------------------------------------
MPIACCEL_DRY_RUN=1 MPIACCEL="$MPIACCEL" bash "$JOBS/local/train.sh" 2 "$SOURCE_DIR/jobs/fortunes-gpt.ini" \
  train.max_steps=5 > out.txt 2> err.txt || { cat err.txt; fail "local dry run failed"; }
expect_contains out.txt "mpirun -np 2 "
expect_contains out.txt "$MPIACCEL train --config $SOURCE_DIR/jobs/fortunes-gpt.ini train.max_steps=5"
bash "$JOBS/local/train.sh" 2 > out.txt 2> err.txt
[ $? = 2 ] || fail "local script without CONFIG should exit 2"
expect_contains err.txt "usage:"
# For real, a few steps of a small GPT on 2 ranks.
MPIACCEL="$MPIACCEL" bash "$JOBS/local/train.sh" 2 "$SOURCE_DIR/jobs/fortunes-gpt.ini" train.max_steps=2 \
  train.eval_batches=1 train.sample_tokens=0 model.n_layer=1 checkpoint.save_at_end=false \
  logging.metrics_file=local.jsonl > out.txt 2> err.txt || { cat out.txt err.txt; fail "local training failed"; }
[ "$(grep -c '"val_loss"' local.jsonl)" = 1 ] || fail "local run: no evaluation in $(cat local.jsonl)"
echo "PASS"
