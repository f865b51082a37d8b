# ctest: timeout 400
# [parallelism] through `mpiaccel train` and `mpiaccel env`, the GPT at np 4:
# - dp_replicate_size 2 under fsdp is HSDP with groups of 2: bit-identical
#   losses and parameters to [fsdp] HYBRID_SHARD with hybrid_group_size 2,
#   its older spelling, and within 1e-5 of plain DDP;
# - the trainer and `mpiaccel env` show the mesh and each rank's place in it;
# - a mesh that does not fit the job, or replicas under ZeRO, is one line.
source "$(dirname "$0")/lib.sh" "$1"

GPT=(--config "$SOURCE_DIR/jobs/fortunes-gpt.ini" train.seq_len=32 model.n_layer=2 model.n_embd=64
     train.max_steps=8 train.eval_every=0 train.log_every=1 train.sample_tokens=0 logging.progress=off
     scheduler.name=constant scheduler.warmup_steps=2 checkpoint.save_at_end=true train.batch_size=3)
run() {  # run NAME EXTRA...
  local name=$1; shift
  mpi 4 "$MPIACCEL" train "${GPT[@]}" "$@" logging.metrics_file="$name.jsonl" checkpoint.dir="$name.ckpt" \
    > "$name.out" 2>&1 || { cat "$name.out"; fail "run $name"; }
}

run ddp distributed.strategy=ddp
expect_contains ddp.out "mesh dp_replicate 1 × dp_shard 4 (4 ranks), strategy ddp"
run hsdp_mesh distributed.strategy=fsdp parallelism.dp_replicate_size=2
expect_contains hsdp_mesh.out "mesh dp_replicate 2 × dp_shard 2 (4 ranks), strategy fsdp"
run hsdp_keys distributed.strategy=fsdp fsdp.sharding_strategy=HYBRID_SHARD fsdp.hybrid_group_size=2
expect_contains hsdp_keys.out "mesh dp_replicate 2 × dp_shard 2 (4 ranks)"
compare_runs hsdp_keys hsdp_mesh 1 8 0
compare_runs ddp hsdp_mesh 1 8 1e-5

mpi 4 "$MPIACCEL" env --config "$SOURCE_DIR/jobs/fortunes-gpt.ini" distributed.strategy=fsdp \
  parallelism.dp_replicate_size=auto parallelism.dp_shard_size=2 > env.txt 2>&1 || { cat env.txt; fail "mpiaccel env with a mesh"; }
expect_contains env.txt "mesh            dp_replicate 2 × dp_shard 2 (4 ranks)"
grep -Eq '^ +3 .* \(1,1\)$' env.txt || { cat env.txt; fail "env does not place rank 3 at (1,1)"; }

refused() {  # refused EXPECTED OVERRIDES...
  local want=$1; shift
  mpi 4 "$MPIACCEL" train "${GPT[@]}" "$@" checkpoint.dir=refused.ckpt > refused.out 2>&1 \
    && fail "accepted: $*"
  expect_contains refused.out "$want"
}
mpi 4 "$MPIACCEL" env parallelism.dp_shard_size=3 > env_bad.txt 2>&1 || { cat env_bad.txt; fail "env with a bad mesh"; }
expect_contains env_bad.txt "mesh            none: [parallelism] dp_replicate_size 1 × dp_shard_size 3 = 3, but the job has 4 ranks"

refused "[parallelism] dp_replicate_size 3 does not divide the 4 ranks" \
  distributed.strategy=fsdp parallelism.dp_replicate_size=3
refused "[parallelism] dp_replicate_size 2: ZeRO shards over every data-parallel rank" \
  distributed.strategy=zero parallelism.dp_replicate_size=2
echo "PASS"
