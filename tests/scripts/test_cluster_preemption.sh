# ctest: timeout 300; labels cluster; lock cluster
# Pre-emption for real, on two hosts under Slurm: jobs/slurm/train-srun.sbatch
# as shipped (--signal=USR1@90 --requeue), its USR1 sent now with
# `scancel --signal=USR1`. The ranks agree, checkpoint and exit 3; the batch
# script requeues the job; Slurm starts it again; it resumes from the
# checkpoint and finishes. Its metrics show every step once, none skipped,
# and the losses of an uninterrupted run of the same job, exactly.
source "$(dirname "$0")/lib.sh" "$1"
cluster_up --hosts 2 --slurm

STEPS=40
run_job() {  # run_job NAME: submits the shipped srun script; the job id
  submit --ntasks-per-node=2 --cpus-per-task=1 --gpus-per-node=0 --time=10 -o "$WORK/$1.out" \
    --export="ALL,MPIACCEL=$MPIACCEL,CONFIG=$SOURCE_DIR/jobs/fortunes-gpt.ini,RUN_DIR=$WORK/$1" \
    "$SOURCE_DIR/jobs/slurm/train-srun.sbatch" train.max_steps=$STEPS train.eval_every=0 \
    train.log_every=1 train.sample_tokens=0 train.seq_len=32 model.n_layer=2 model.n_embd=64 \
    scheduler.name=constant checkpoint.save_at_end=false
}

straight=$(run_job straight) || fail "sbatch"
job=$(run_job preempted) || fail "sbatch"
wait_for_lines "preempted/metrics.jsonl" '"loss"' 8
on node1 scancel --signal=USR1 "$job" || fail "scancel --signal=USR1 $job"
for id in "$straight" "$job"; do
  state=$(job_ended "$id" 200)
  [ "$state" = COMPLETED ] || { cat straight.out preempted.out; fail "job $id ended $state"; }
done
expect_contains preempted.out "pre-empted after a checkpoint: requeueing job $job"
expect_contains preempted.out "(restart 1)"
expect_contains preempted.out "finished"

/usr/bin/python3 - "$STEPS" <<'PY' || fail "the requeued job did not continue the uninterrupted run exactly"
import json, sys
steps = int(sys.argv[1])
def rows(p): return [r for r in map(json.loads, open(p)) if "loss" in r]
straight = {r["step"]: r["loss"] for r in rows("straight/metrics.jsonl")}
logged = [r["step"] for r in rows("preempted/metrics.jsonl")]
assert logged == list(range(1, steps + 1)), f"steps logged: {logged}"
for r in rows("preempted/metrics.jsonl"):
    assert r["loss"] == straight[r["step"]], f"step {r['step']}: {r['loss']} != {straight[r['step']]}"
print(f"pre-empted, requeued and resumed: {steps} steps, each once, losses identical to the uninterrupted run")
PY
echo PASS
