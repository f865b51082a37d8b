# ctest: timeout 300; labels cluster; lock cluster
# A real Slurm over two hosts of the cluster in a box (slurmctld on node1, a
# slurmd per host, munge, MpiDefault=pmix):
#   - `srun --mpi=pmix mpiaccel env` sees 4 ranks on node1 and node2 with the
#     right local ranks and node ids, its launcher srun;
#   - `mpiaccel launch` inside an allocation picks srun;
#   - jobs/slurm/train-srun.sbatch and train-mpirun.sbatch, as shipped but for
#     what this 2-core machine allows (2 tasks per node, 1 cpu each, no GPU)
#     and the run's length, run to completion over 2 nodes.
source "$(dirname "$0")/lib.sh" "$1"
cluster_up --hosts 2 --slurm

on node1 srun --immediate=30 -N 2 --ntasks-per-node=2 "$MPIACCEL" env > env.txt 2>&1 || { cat env.txt; fail "srun mpiaccel env"; }
expect_contains env.txt "world size      4 on 2 node(s)"
for row in "0  node1                0/2        0/2    srun" "1  node1                1/2        0/2    srun" \
           "2  node2                0/2        1/2    srun" "3  node2                1/2        1/2    srun"; do
  expect_contains env.txt "$row"
done

job=$(submit -N 2 --ntasks-per-node=2 -o "$WORK/launch.out" \
  --wrap "$MPIACCEL launch --dry-run -- $MPIACCEL train") || fail "sbatch"
[ "$(job_ended "$job" 60)" = COMPLETED ] || { cat launch.out; fail "launch inside an allocation"; }
expect_contains launch.out "srun --mpi=pmix --nodes=2 --ntasks-per-node=2"

# The shipped batch scripts, both at once.
FIT=(--ntasks-per-node=2 --cpus-per-task=1 --gpus-per-node=0 --time=10)
declare -A jobs
for script in train-srun train-mpirun; do
  jobs[$script]=$(submit "${FIT[@]}" -o "$WORK/$script.out" \
    --export="ALL,MPIACCEL=$MPIACCEL,CONFIG=$SOURCE_DIR/jobs/fortunes-gpt.ini,RUN_DIR=$WORK/$script,OMPI_ALLOW_RUN_AS_ROOT=1,OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" \
    "$SOURCE_DIR/jobs/slurm/$script.sbatch" train.max_steps=20 train.eval_every=10 train.log_every=5) \
    || fail "sbatch $script.sbatch"
done
for script in train-srun train-mpirun; do
  state=$(job_ended "${jobs[$script]}" 150)
  [ "$state" = COMPLETED ] || { cat "$script.out"; fail "$script.sbatch: job ended $state"; }
  expect_contains "$script.out" "on 2 node(s)"
  expect_contains "$script.out" "strategy ddp on 4 rank(s)"
  expect_contains "$script.out" "done: 20 steps"
  expect_contains "$script.out" "finished"
  grep -q '"step": 20' "$script/metrics.jsonl" || fail "$script: no step 20 in its metrics"
done
echo PASS
