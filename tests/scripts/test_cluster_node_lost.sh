# ctest: timeout 300; labels cluster; lock cluster
# A node lost: a 2-host job under Slurm (jobs/slurm/train-srun.sbatch) loses
# every process of node2 (`cluster kill node2`: its slurmd, slurmstepd and
# ranks, SIGKILL) mid-run. The run ends well within its deadline
# ([distributed] timeout_s = 5 here, less than Slurm's SlurmdTimeout; Slurm requeues the job, --requeue, and
# it waits for two nodes), with messages that name the lost ranks and host;
# a resubmission on the remaining host resumes from `latest` at the new world
# size (2 ranks instead of 4) and finishes the run.
source "$(dirname "$0")/lib.sh" "$1"
cluster_up --hosts 2 --slurm

RUN=(train.max_steps=60 train.eval_every=0 train.log_every=1 train.sample_tokens=0
     train.seq_len=32 model.n_layer=2 model.n_embd=64 checkpoint.every_steps=5
     distributed.timeout_s=5)
run_job() {  # run_job NODES SBATCH-ARGS...: the shipped srun script; the job id
  local nodes=$1
  shift
  submit -N "$nodes" --ntasks-per-node=2 --cpus-per-task=1 --gpus-per-node=0 \
    --time=10 --open-mode=append -o "$WORK/job.out" "$@" \
    --export="ALL,MPIACCEL=$MPIACCEL,CONFIG=$SOURCE_DIR/jobs/fortunes-gpt.ini,RUN_DIR=$WORK/run" \
    "$SOURCE_DIR/jobs/slurm/train-srun.sbatch" "${RUN[@]}"
}

job=$(run_job 2) || fail "sbatch"
for _ in $(seq 1 600); do [ -f run/checkpoints/step_00000010.h5 ] && break; sleep 0.1; done
[ -f run/checkpoints/step_00000010.h5 ] || { cat job.out; fail "no checkpoint at step 10 after 60 s"; }
"$CLUSTER" kill node2
killed=$SECONDS
# Its run ends: Slurm requeues a --requeue job after a node failure (it then
# waits for two nodes again), or it ends.
for _ in $(seq 1 450); do
  state=$(job_state "$job")
  [ "$state" = RUNNING ] || break
  sleep 0.2
done
ended=$((SECONDS - killed))
[ "$state" != RUNNING ] || { cat job.out; fail "the job still runs $ended s after node2 was lost"; }
echo "job $job ended $state $ended s after node2 was lost"
[ "$ended" -le 40 ] || fail "the job took $ended s to end (deadline 5 s, and Slurm's node timeout 10 s)"
cat job.out
expect_contains job.out "ranks 2-3 on node2 no longer answer"

# node2 is down now: the requeued job would wait for two nodes forever. The
# rest of the run goes to node1 alone, at 2 ranks.
on node1 scancel "$job"
last=$(sed -n 's/.*step_0*\([0-9]*\)\.h5.*/\1/p' run/checkpoints/latest)
job=$(run_job 1 -w node1) || fail "sbatch on node1"
state=$(job_ended "$job" 150)
[ "$state" = COMPLETED ] || { cat job.out; fail "the resubmitted job ended $state"; }
expect_contains job.out "resumed from"
expect_contains job.out "at step $last"
expect_contains job.out "strategy ddp on 2 rank(s)"
expect_contains job.out "finished"
/usr/bin/python3 - "$last" <<'PY' || fail "the resumed run did not continue to step 60"
import json, sys
last = int(sys.argv[1])
steps = [r["step"] for r in map(json.loads, open("run/metrics.jsonl")) if "loss" in r]
after = steps[steps.index(last) + 1:] if last in steps else steps
assert after[-1] == 60 and after[:1] == [last + 1], (last, after[:3], after[-3:])
print(f"resumed after step {last} at 2 ranks, finished at step 60")
PY
echo PASS
