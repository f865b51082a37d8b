# ctest: timeout 300; labels cluster; lock cluster
# Two hosts of the cluster in a box (tools/cluster/cluster), ranks started on
# both by mpirun through the cluster's rsh agent:
#   - `mpiaccel env` sees 4 ranks on node1 and node2, local ranks 0/2 and 1/2
#     and node ids 0/2 and 1/2 on each;
#   - DDP (node-shared parameters: one copy per host, the hierarchical
#     all-reduce across them), ZeRO 1, 2 and 3, FSDP FULL_SHARD (its
#     reduce-scatters and all-gathers in two levels), FSDP with hpZ (backward
#     gathers within the host) and HYBRID_SHARD (sharded within a host,
#     replicated across) on 2 hosts x 2
#     ranks reproduce one process with the same global batch: losses of 10
#     steps within 1e-5 relative, parameters within 1e-5 (ckpt diff), as the
#     single-host suites;
#   - one checkpoint file written by both hosts (FSDP) loads on one host, at
#     another world size and strategy, and continues as the single process.
source "$(dirname "$0")/lib.sh" "$1"
cluster_up --hosts 2

mpi2 2 "$MPIACCEL" env > env.txt 2>&1 || { cat env.txt; fail "mpiaccel env across hosts"; }
expect_contains env.txt "world size      4 on 2 node(s)"
for row in "0  node1                0/2        0/2" "1  node1                1/2        0/2" \
           "2  node2                0/2        1/2" "3  node2                1/2        1/2"; do
  expect_contains env.txt "$row"
done

# --hostfile too: the cluster's hostfile names both hosts, 2 slots each.
mpi --on node1 4 --hostfile /run/mpiaccel-cluster/hostfile hostname \
  | sort | uniq -c > hostfile.txt || fail "mpirun --hostfile"
expect_contains hostfile.txt "2 node1"
expect_contains hostfile.txt "2 node2"

GPT=(--config "$SOURCE_DIR/jobs/fortunes-gpt.ini" train.seq_len=32 model.n_layer=2 model.n_embd=64)
COMMON=(train.eval_every=0 train.log_every=1 train.sample_tokens=0 logging.progress=off
        scheduler.name=constant scheduler.warmup_steps=3 checkpoint.save_at_end=true)

train() {  # train NAME STEPS BATCH LAUNCH... -- ARGS...: one run, metrics NAME.jsonl, checkpoints NAME.ckpt
  local name=$1 steps=$2 batch=$3 launch=()
  shift 3
  while [ "$1" != -- ]; do launch+=("$1"); shift; done
  shift
  "${launch[@]}" "$MPIACCEL" train "${GPT[@]}" "${COMMON[@]}" train.max_steps="$steps" \
    train.batch_size="$batch" logging.metrics_file="$WORK/$name.jsonl" checkpoint.dir="$WORK/$name.ckpt" \
    "$@" > "$name.out" 2>&1 || { cat "$name.out"; fail "run $name"; }
}


train single 10 12 mpi 1 --
declare -A STRATEGY=(
  [ddp]="distributed.strategy=ddp logging.level=debug"
  [zero1]="distributed.strategy=zero zero.stage=1"
  [zero2]="distributed.strategy=zero zero.stage=2"
  [zero3]="distributed.strategy=zero zero.stage=3"
  [fsdp]="distributed.strategy=fsdp logging.level=debug"
  [hybrid]="distributed.strategy=fsdp fsdp.sharding_strategy=HYBRID_SHARD"
  [hpz]="distributed.strategy=fsdp fsdp.secondary_partition_size=0 logging.trace=$WORK/hpz.json"
)
for name in ddp zero1 zero2 zero3 fsdp hybrid hpz; do
  read -r -a args <<< "${STRATEGY[$name]}"
  train "$name" 10 3 mpi2 2 -- "${args[@]}"
  compare_runs single "$name" 1 10 1e-5
done
expect_contains ddp.out "the 2 ranks of each node share one copy of the parameters"
expect_contains ddp.out "collectives across nodes: hierarchical over 2 nodes x 2 ranks"
expect_contains fsdp.out "collectives across nodes: hierarchical over 2 nodes x 2 ranks"
expect_contains hpz.out "backward gathers within groups of 2 ranks"
# FSDP's units (≥ 64 KiB) reduce-scatter and gather in two levels (the
# hierarchy above), through which these runs reproduce the one process; with
# hpZ, backward's gathers stay on the host.
expect_backward_gathers_in_group "$WORK/hpz.json" 4

# The file both hosts wrote, on one host: 2 ranks of node1, DDP, two more steps.
train single12 12 12 mpi 1 --
train one_host 12 6 mpi --on node1 2 -- \
  checkpoint.resume="$WORK/fsdp.ckpt/step_00000010.h5"
expect_contains one_host.out "at step 10"
compare_runs single12 one_host 11 12 1e-5
echo PASS
