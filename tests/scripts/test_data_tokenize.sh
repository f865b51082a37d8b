# ctest: timeout 500
# `mpiaccel data tokenize` end to end on Debian's fortunes (a small 512-piece
# vocabulary to stay fast): its usage errors, the files it writes, reuse of a
# given model, then the bundled BPE job trains on them at np 2 as shipped
# (its data_dir runs/fortunes-bpe, relative to the working directory).
source "$(dirname "$0")/lib.sh" "$1"

expect_status() {  # expect_status STATUS COMMAND...
  local want=$1; shift
  "$@" > out.txt 2> err.txt
  local got=$?
  [ "$got" = "$want" ] || { cat out.txt err.txt; fail "'$*' exited with $got, not $want"; }
}

expect_status 0 "$MPIACCEL" data --help
expect_contains out.txt "usage: mpiaccel data tokenize"
expect_status 2 "$MPIACCEL" data
expect_contains err.txt "mpiaccel: data: which subcommand? accepted: tokenize"
expect_status 2 "$MPIACCEL" data tokenize --output x
expect_contains err.txt "mpiaccel: data: --input DIR|FILE is required"
expect_status 2 "$MPIACCEL" data tokenize --input x --output y --vocab-size 12
expect_contains err.txt "--vocab-size '12' is not an integer in [260, 1048576]"
expect_status 2 "$MPIACCEL" data tokenize --input x --output y --vocab-size 512 --model m
expect_contains err.txt "exclude each other"
expect_status 2 "$MPIACCEL" data tokenize --input x --output y --bogus
expect_contains err.txt "unexpected argument '--bogus'"
expect_status 1 "$MPIACCEL" data tokenize --input /nonexistent --output y
expect_contains err.txt "mpiaccel: data: cannot open --input /nonexistent"
[ "$(wc -l < err.txt)" = 1 ] || fail "the error is not one line: $(cat err.txt)"

start=$(date +%s%N)
"$MPIACCEL" data tokenize --input /usr/share/games/fortunes --output runs/fortunes-bpe \
  --vocab-size 512 > tok.txt 2> tok_err.txt || { cat tok.txt tok_err.txt; fail "tokenize failed"; }
echo "tokenize (vocab 512): $(( ($(date +%s%N) - start) / 1000000 )) ms"
cat tok.txt
for f in tokenizer.model train.tokens val.tokens; do
  [ -s "runs/fortunes-bpe/$f" ] || fail "runs/fortunes-bpe/$f was not written"
done
/usr/bin/python3 - <<'PY' || fail "token files are not as documented"
import os, struct
for split in ("train", "val"):
    path = "runs/fortunes-bpe/%s.tokens" % split
    data = open(path, "rb").read()
    magic, version, dtype, count, vocab = struct.unpack("<8sIIQQ", data[:32])
    assert (magic, version, dtype, vocab) == (b"MPIATOKS", 1, 2, 512), (magic, version, dtype, vocab)
    assert len(data) == 32 + 2 * count, (len(data), count)
    ids = struct.unpack("<%dH" % count, data[32:])
    assert max(ids) < 512 and len(set(ids)) > 250, (max(ids), len(set(ids)))
    print(split, count, "tokens")
PY

# A given model: the same ids, and the model is copied beside them.
"$MPIACCEL" data tokenize --input /usr/share/games/fortunes --output again \
  --model runs/fortunes-bpe/tokenizer.model > again.txt 2>&1 || { cat again.txt; fail "--model failed"; }
cmp runs/fortunes-bpe/val.tokens again/val.tokens || fail "--model gave other ids"
cmp runs/fortunes-bpe/tokenizer.model again/tokenizer.model || fail "the model was not copied"

# The bundled job as shipped (vocab_size 2048 >= 512), shortened.
mpi 2 "$MPIACCEL" train --config "$SOURCE_DIR/jobs/fortunes-gpt-bpe.ini" \
  train.max_steps=5 train.eval_every=5 train.eval_batches=2 train.log_every=1 \
  logging.progress=lines logging.metrics_file=metrics.jsonl checkpoint.dir=ckpt > train.txt 2>&1 \
  || { cat train.txt; fail "train on the BPE job exited with $?"; }
expect_contains train.txt "on tokens"
/usr/bin/python3 - <<'PY' || fail "metrics of the BPE job are missing"
import json
rows = [json.loads(l) for l in open("metrics.jsonl")]
assert [r["step"] for r in rows if "loss" in r] == [1, 2, 3, 4, 5], rows
assert any("val_loss" in r for r in rows), rows
PY
echo "PASS"
