# ctest: timeout 120
# `mpiaccel estimate-memory`: the table and the JSON for a config, the ZeRO
# arithmetic checked from the JSON by an independent calculation, overrides,
# activation checkpointing, and the usage / config errors.
source "$(dirname "$0")/lib.sh" "$1"

cat > job.ini <<'INI'
[launch]
num_processes = 4
[distributed]
strategy = fsdp
[train]
model = gpt
batch_size = 8
seq_len = 128
[model]
n_layer = 4
n_head = 4
n_embd = 128
INI

"$MPIACCEL" estimate-memory --config job.ini > table.txt 2> err.txt || { cat err.txt; fail "estimate-memory failed"; }
expect_contains table.txt "Memory per rank for gpt: 842,496 parameters (4 units, largest 198,272; 49,408 outside units), 4 ranks"
for row in "| ddp " "| zero1 " "| zero2 " "| fsdp/zero3 " "| zero2+offload " "| fsdp/zero3+offload "; do
  expect_contains table.txt "$row"
done
[ "$(grep -c '^| ' table.txt)" = 22 ] || { cat table.txt; fail "expected a header and 21 rows"; }

"$MPIACCEL" estimate-memory --config job.ini --world 8 --json > est.json || fail "--json failed"
python3 - est.json <<'PY' || fail "the JSON's numbers are wrong"
import json, sys
d = json.load(open(sys.argv[1]))
psi, n = d["model"]["params"], d["world_size"]
assert n == 8 and psi == 842496, (n, psi)
rows = {(r["strategy"], r["offload"], r["precision"]): r for r in d["rows"]}
assert len(rows) == 21
def states(r): return r["param_bytes"] + r["grad_bytes"] + r["optimizer_bytes"]
ceil = lambda x: -(-x // n)
# fp32: params 4Ψ, grads 4Ψ (bucket views, the default: no second copy), AdamW 8Ψ.
assert states(rows["ddp", False, "fp32"]) == 16 * psi
assert states(rows["zero1", False, "fp32"]) == 8 * psi + ceil(psi) * 8
assert states(rows["zero2", False, "fp32"]) == 4 * psi + ceil(psi) * 12
# mixed precision: 2Ψ + 2Ψ + K = 12.
assert states(rows["zero2", False, "bf16"]) == 2 * psi + ceil(psi) * 14
root, unit = d["model"]["root_params"], d["model"]["largest_unit_params"]
f = rows["fsdp", False, "bf16"]
assert f["param_bytes"] == ceil(psi) * 2 + 2 * root and f["gathered_bytes"] == 4 * unit
for r in d["rows"]:
    assert r["device_peak_bytes"] == states(r) + r["gathered_bytes"] + r["activation_bytes"]
    if r["offload"]:
        assert r["optimizer_bytes"] == 0 and r["host_bytes"] > 0
PY

# Without bucket views DDP holds the gradients twice (.grad and the buckets).
"$MPIACCEL" estimate-memory --config job.ini --world 8 --json ddp.gradient_as_bucket_view=false > copied.json \
  || fail "the gradient_as_bucket_view override failed"
python3 - copied.json <<'PY' || fail "DDP without bucket views should hold 20 bytes per parameter in fp32"
import json, sys
d = json.load(open(sys.argv[1]))
r = next(r for r in d["rows"] if (r["strategy"], r["offload"], r["precision"]) == ("ddp", False, "fp32"))
assert r["param_bytes"] + r["grad_bytes"] + r["optimizer_bytes"] == 20 * d["model"]["params"]
PY

# Overrides and activation checkpointing lower the activations.
"$MPIACCEL" estimate-memory --config job.ini --json fsdp.activation_checkpointing=true > ckpt.json || fail "override failed"
python3 - est.json ckpt.json <<'PY' || fail "activation checkpointing did not lower the activations"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert b["activation_checkpointing"] and b["world_size"] == 4
assert b["rows"][0]["activation_bytes"] * 2 < a["rows"][0]["activation_bytes"]
PY
# Context parallelism: a rank's activations are those of its seq_len / cp_size
# positions, and the strategy shards over the cp ranks too (4 ranks: cp 2 × dp 2).
"$MPIACCEL" estimate-memory --config job.ini --world 4 --json parallelism.cp_size=2 train.seq_len=128 > cp2.json \
  || fail "the cp estimate failed"
"$MPIACCEL" estimate-memory --config job.ini --world 4 --json train.seq_len=64 > cp1.json \
  || fail "the estimate at half the sequence failed"
python3 - cp2.json cp1.json <<'PY' || fail "cp 2 should estimate the activations of half the sequence"
import json, sys
cp, half = (json.load(open(p)) for p in sys.argv[1:])
for a, b in zip(cp["rows"], half["rows"]):
    assert a["activation_bytes"] == b["activation_bytes"], (a, b)
zero1 = lambda d: next(r for r in d["rows"] if (r["strategy"], r["offload"], r["precision"]) == ("zero1", False, "fp32"))
assert zero1(cp)["optimizer_bytes"] * 4 == 8 * cp["model"]["params"]  # Adam's 8 bytes over all 4 ranks
PY
"$MPIACCEL" estimate-memory --config job.ini --world 4 parallelism.cp_size=2 train.seq_len=128 > cp2.txt
expect_contains cp2.txt "context parallel: 64 tokens of each sequence on each of 2 cp ranks"

# Without --config: the defaults (one rank).
"$MPIACCEL" estimate-memory train.model=mlp > mlp.txt || fail "defaults failed"
expect_contains mlp.txt "Memory per rank for mlp"
expect_contains mlp.txt "1 rank,"

"$MPIACCEL" estimate-memory --help > help.txt || fail "--help failed"
expect_contains help.txt "usage: mpiaccel estimate-memory"
set +e
"$MPIACCEL" estimate-memory --config job.ini --world 0 > /dev/null 2> err.txt
[ $? = 2 ] || fail "--world 0: exit status is not 2"
expect_contains err.txt "mpiaccel: estimate-memory: --world '0' is not a rank count"
"$MPIACCEL" estimate-memory --config missing.ini > /dev/null 2> err.txt
[ $? = 1 ] || fail "a missing config: exit status is not 1"
expect_contains err.txt "mpiaccel: estimate-memory:"
"$MPIACCEL" estimate-memory --config job.ini train.model=resnet > /dev/null 2> err.txt
[ $? = 1 ] || fail "a bad model: exit status is not 1"
echo "estimate-memory: ok"
