# ctest: timeout 500
# `mpiaccel data tokenize` end to end on Debian's fortunes (a small 512-piece
# vocabulary to stay fast): its usage errors, the files it writes, reuse of a
# given model. Then the bundled BPE job as shipped, at np 2 from an empty
# directory: its first run tokenizes the fortunes itself ([train]
# tokenize_from into runs/fortunes-bpe), its second reuses the files, and a
# missing text fails every rank with rank 0's one-line message.
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
expect_contains err.txt "mpiaccel: data: cannot open the text to tokenize, /nonexistent"
[ "$(wc -l < err.txt)" = 1 ] || fail "the error is not one line: $(cat err.txt)"

start=$(date +%s%N)
"$MPIACCEL" data tokenize --input /usr/share/games/fortunes --output bpe512 \
  --vocab-size 512 > tok.txt 2> tok_err.txt || { cat tok.txt tok_err.txt; fail "tokenize failed"; }
echo "tokenize (vocab 512): $(( ($(date +%s%N) - start) / 1000000 )) ms"
cat tok.txt
for f in tokenizer.model train.tokens val.tokens; do
  [ -s "bpe512/$f" ] || fail "bpe512/$f was not written"
done
/usr/bin/python3 - <<'PY' || fail "token files are not as documented"
import os, struct
for split in ("train", "val"):
    path = "bpe512/%s.tokens" % split
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
  --model bpe512/tokenizer.model > again.txt 2>&1 || { cat again.txt; fail "--model failed"; }
cmp bpe512/val.tokens again/val.tokens || fail "--model gave other ids"
cmp bpe512/tokenizer.model again/tokenizer.model || fail "the model was not copied"

# The bundled job as shipped, shortened, in a directory with no token files.
train_job() {  # train_job OUTPUT [OVERRIDES...]
  local out=$1; shift
  (cd job && mpi 2 "$MPIACCEL" train --config "$SOURCE_DIR/jobs/fortunes-gpt-bpe.ini" \
    train.max_steps=5 train.eval_every=5 train.eval_batches=2 train.log_every=1 \
    logging.progress=lines logging.metrics_file=metrics.jsonl checkpoint.dir=ckpt "$@") > "$out" 2>&1
}
mkdir job
train_job train.txt || { cat train.txt; fail "the BPE job as shipped exited with $?"; }
expect_contains train.txt "tokenized /usr/share/games/fortunes into runs/fortunes-bpe: 2048-piece BPE"
expect_contains train.txt "on tokens"
for f in tokenizer.model train.tokens val.tokens; do
  [ -s "job/runs/fortunes-bpe/$f" ] || fail "the job did not write runs/fortunes-bpe/$f"
done
/usr/bin/python3 - <<'PY' || fail "metrics of the BPE job are missing"
import json
rows = [json.loads(l) for l in open("job/metrics.jsonl")]
assert [r["step"] for r in rows if "loss" in r] == [1, 2, 3, 4, 5], rows
assert any("val_loss" in r for r in rows), rows
PY
# The validation text is the byte-level split's: the same as the command's.
"$MPIACCEL" data tokenize --input /usr/share/games/fortunes --output cmd2048 \
  --model job/runs/fortunes-bpe/tokenizer.model > cmd.txt 2>&1 || { cat cmd.txt; fail "--model failed"; }
cmp cmd2048/val.tokens job/runs/fortunes-bpe/val.tokens || fail "the job's val.tokens differ from the command's"

# A second run reuses the files (untouched: a rewrite renames a new file
# over the old one, which changes the inode even within the same second).
stamp=$(stat -c %i.%Y.%s job/runs/fortunes-bpe/train.tokens)
rm -rf job/ckpt job/metrics.jsonl
train_job again.txt || { cat again.txt; fail "the second run exited with $?"; }
expect_contains again.txt "are there already; using them"
[ "$stamp" = "$(stat -c %i.%Y.%s job/runs/fortunes-bpe/train.tokens)" ] || fail "the second run rewrote the tokens"

# Text that is not there: every rank stops with rank 0's message, no files.
rm -rf job/ckpt job/metrics.jsonl
train_job missing.txt train.data_dir=runs/none train.tokenize_from=/nonexistent \
  && { cat missing.txt; fail "a missing tokenize_from did not fail"; }
expect_contains missing.txt "rank 0: [train] tokenize_from: cannot open the text to tokenize, /nonexistent"
[ ! -e job/runs/none/train.tokens ] || fail "a failed tokenize left train.tokens"
echo "PASS"
