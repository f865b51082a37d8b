# ctest: timeout 300
# `mpiaccel launch`: the printed command for a workstation and for a Slurm
# allocation of 2 nodes × 4 tasks (synthetic environment), usage errors, and
# real launches: a 2-rank training run with the config passed on, and the
# launched program's exit status coming back as ours.
source "$(dirname "$0")/lib.sh" "$1"

cat > run.ini << 'EOF'
[launch]
num_processes = 2
cpus_per_process = 1
EOF

# Workstation: mpirun, bound to one core each, OMP_NUM_THREADS and NCCL_*
# forwarded, the config appended to `mpiaccel train`.
env -u SLURM_JOB_ID -u OMP_NUM_THREADS NCCL_DEBUG=WARN \
  "$MPIACCEL" launch --dry-run --config run.ini -- "$MPIACCEL" train train.max_steps=3 > cmd.txt 2> err.txt ||
  { cat err.txt; fail "dry run failed"; }
[ "$(wc -l < cmd.txt)" = 1 ] || fail "the dry run should print one line: $(cat cmd.txt)"
expect_contains cmd.txt "mpirun -np 2 "
expect_contains cmd.txt " --map-by ppr:2:node:PE=1 --bind-to core "
expect_contains cmd.txt " -x OMP_NUM_THREADS=1 "
expect_contains cmd.txt " -x NCCL_DEBUG "
expect_contains cmd.txt "$MPIACCEL train --config run.ini train.max_steps=3"
if [ "$(id -u)" = 0 ]; then expect_contains cmd.txt " --allow-run-as-root "; fi

# A user's OMP_NUM_THREADS wins; more ranks than cores oversubscribe unbound.
OMP_NUM_THREADS=5 "$MPIACCEL" launch --dry-run --config run.ini launch.num_processes=4096 \
  launch.cpus_per_process=0 -- ./prog 'an arg' > cmd.txt 2> err.txt || fail "oversubscribed dry run failed"
expect_contains cmd.txt "mpirun -np 4096 "
expect_contains cmd.txt " --oversubscribe --map-by ppr:4096:node --bind-to none "
expect_contains cmd.txt " -x OMP_NUM_THREADS=5 "
grep -q " ./prog 'an arg'\$" cmd.txt || fail "the program should end the line, quoted: $(cat cmd.txt)"
expect_contains err.txt "mpiaccel: launch: note: 4096 ranks of 1 core(s) each"

# Inside a Slurm allocation of 2 nodes × 4 tasks with 8 cpus each: srun.
env -u OMP_NUM_THREADS SLURM_JOB_ID=4242 SLURM_JOB_NUM_NODES=2 SLURM_TASKS_PER_NODE='4(x2)' SLURM_NTASKS=8 \
  SLURM_CPUS_PER_TASK=8 \
  "$MPIACCEL" launch --dry-run --config run.ini launch.num_machines=2 launch.num_processes=8 \
  -- "$MPIACCEL" train > cmd.txt 2> err.txt || { cat err.txt; fail "slurm dry run failed"; }
expect_contains cmd.txt "OMP_NUM_THREADS=8 srun --mpi=pmix --nodes=2 --ntasks-per-node=4 --cpus-per-task=8 --cpu-bind=cores -K1 $MPIACCEL train --config run.ini"
[ ! -s err.txt ] || fail "unexpected notes: $(cat err.txt)"

# Usage errors: exit 2, one line naming the command.
"$MPIACCEL" launch --dry-run > out.txt 2> err.txt
[ $? = 2 ] || fail "no program should exit 2"
expect_contains err.txt "mpiaccel: launch: no program given"
"$MPIACCEL" launch --dry-run train.max_steps=3 -- true > out.txt 2> err.txt
[ $? = 2 ] || fail "a non-launch override should exit 2"
expect_contains err.txt "only [launch] keys are set here"
"$MPIACCEL" launch --dry-run --config run.ini launch.num_processes=0 -- true > out.txt 2> err.txt
[ $? = 1 ] || fail "a bad launch value should exit 1"
expect_contains err.txt "[launch] num_processes: 0 is out of range; accepted: >= 1"
"$MPIACCEL" launch --dry-run --config missing.ini -- true > out.txt 2> err.txt
[ $? = 1 ] || fail "a missing config should exit 1"
expect_contains err.txt "missing.ini"

# Real launches. The launched program's status is ours (exec, no wrapper).
"$MPIACCEL" launch --config run.ini -- sh -c 'exit 3' > out.txt 2> err.txt
status=$?
[ "$status" = 3 ] || { cat err.txt; fail "status 3 of the program came back as $status"; }
expect_contains err.txt "mpiaccel: launch: mpirun -np 2"

# Every rank sees the launch's environment: 2 ranks, one thread each, and a
# forwarded MPIACCEL_* variable.
env -u OMP_NUM_THREADS MPIACCEL_TEST_MARK=seen \
  "$MPIACCEL" launch --config run.ini -- sh -c 'echo "rank $OMPI_COMM_WORLD_RANK omp $OMP_NUM_THREADS mark $MPIACCEL_TEST_MARK"' \
  > out.txt 2> err.txt || { cat err.txt; fail "launching sh failed"; }
expect_contains out.txt "rank 0 omp 1 mark seen"
expect_contains out.txt "rank 1 omp 1 mark seen"

# A short training run through launch: the config travels to train.
cat >> run.ini << 'EOF'
[distributed]
strategy = ddp
[train]
max_steps = 3
log_every = 1
eval_batches = 2
seq_len = 32
sample_tokens = 0
[model]
n_layer = 1
n_embd = 32
[checkpoint]
save_at_end = false
[logging]
progress = lines
metrics_file = launched.jsonl
EOF
"$MPIACCEL" launch --config run.ini -- "$MPIACCEL" train > out.txt 2> err.txt || {
  cat out.txt err.txt; fail "training through launch failed"; }
expect_contains out.txt "strategy ddp on 2 rank(s)"
[ "$(grep -c '"loss"' launched.jsonl)" = 3 ] || fail "expected 3 logged steps: $(cat launched.jsonl)"
echo "PASS"
