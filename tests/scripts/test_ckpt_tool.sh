# ctest: timeout 180
# `mpiaccel ckpt` without mpirun, and outside readers, on a checkpoint saved by
# 3 ranks: h5ls -r, h5py (values against the formula), ls/--json, show,
# verify, diff, export to safetensors (read back by Python), usage errors;
# then damaged inputs: flipped bytes, a truncated file, a foreign HDF5 file, a
# missing directory - each a one-line error and exit 1.
source "$(dirname "$0")/lib.sh" "$1"
use_ckpt_programs
here=$SOURCE_DIR/tests/scripts
python=/usr/bin/python3
work=$WORK
# expect STATUS WHAT COMMAND...: runs it, output in $work/out and $work/err
expect() {
  local want=$1 what=$2
  shift 2
  "$@" > "$work/out" 2> "$work/err"
  local rc=$?
  if [ "$rc" -ne "$want" ]; then
    check_failed "$what: exit $rc, expected $want"
    sed 's/^/  out: /' "$work/out" | head -20 >&2
    sed 's/^/  err: /' "$work/err" | head -20 >&2
  fi
}
contains() {  # FILE TEXT WHAT
  grep -qF -- "$2" "$1" || { check_failed "$3: '$2' not in output"; sed 's/^/  | /' "$1" | head -20 >&2; }
}

ck=$work/ckpt
expect 0 "save at np 3" mpi 3 "$driver" save "$ck" 1 2 --mib 8
step2=$ck/step_00000002.h5

# Outside readers.
expect 0 "h5ls -r" h5ls -r "$step2"
contains "$work/out" "/model/w                 Dataset {4095, 256}" "h5ls"
contains "$work/out" "/types/bfloat16          Type" "h5ls"
expect 0 "h5dump of the bf16 tensor" h5dump -d /model/b "$step2"
contains "$work/out" "(0): 2, 123.5, 245" "h5dump bf16 values"
expect 0 "h5py" env PYTHONPATH="$here/../python" $python "$here/../python/check_h5py.py" "$step2" 2
cat "$work/out"

# ls, show, verify, diff.
expect 0 "ckpt ls (directory = latest)" "$tool" ckpt ls "$ck"
contains "$work/out" "step 2, world size 3, strategy ddp" "ls"
contains "$work/out" "optim/w/exp_avg" "ls"
expect 0 "ckpt ls --json" "$tool" ckpt ls "$step2" --json
$python -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["step"]==2 and d["world_size"]==3 and [t["name"] for t in d["tensors"]]==["model/w","model/b","model/s","optim/w/exp_avg"] and d["tensors"][0]["shape"]==[4095,256], d' "$work/out" \
  || check_failed "ls --json is not the expected JSON"
expect 0 "ckpt show" "$tool" ckpt show "$ck" model/s
contains "$work/out" "min 2  max 2  mean 2  norm 2" "show model/s"
expect 0 "ckpt show bf16" "$tool" ckpt show "$ck" model/b --head 3
contains "$work/out" "head: 2 123.5 245 ..." "show model/b head"
expect 1 "ckpt show missing tensor" "$tool" ckpt show "$ck" model/nope
contains "$work/err" "mpiaccel: ckpt: checkpoint $step2 has no tensor model/nope" "show missing"
expect 0 "ckpt verify" "$tool" ckpt verify "$ck"
contains "$work/out" "ok $step2: step 2, 4 tensors" "verify"
expect 1 "ckpt diff of two steps" "$tool" ckpt diff "$ck/step_00000001.h5" "$ck"
contains "$work/out" "differ: model/w: max |a-b| 1" "diff"
expect 0 "ckpt diff within atol" "$tool" ckpt diff "$ck/step_00000001.h5" "$ck" --atol 1.5
expect 0 "ckpt diff identical" "$tool" ckpt diff "$ck" "$step2"
contains "$work/out" "bit-identical" "diff same"

# export -> safetensors -> Python.
expect 0 "ckpt export --with-optimizer" "$tool" ckpt export "$ck" -o "$work/out.safetensors" --with-optimizer
expect 0 "safetensors read by Python" env PYTHONPATH="$here/../python" $python "$here/../python/check_safetensors.py" "$work/out.safetensors" 2
cat "$work/out"
expect 0 "ckpt export (the model alone, by default)" "$tool" ckpt export "$ck" -o "$work/model.safetensors"
$python -c 'import json,struct,sys; b=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",b[:8])[0]; h=json.loads(b[8:8+n]); h.pop("__metadata__"); assert sorted(h)==["b","s","w"], h' "$work/model.safetensors" \
  || check_failed "--model-only keys"

# Usage.
expect 0 "ckpt --help" "$tool" ckpt verify --help
contains "$work/out" "usage: mpiaccel ckpt ls PATH [--json]" "help"
expect 2 "unknown subcommand" "$tool" ckpt frob "$ck"
contains "$work/err" "mpiaccel: ckpt: unknown subcommand 'frob'" "usage error"
expect 2 "export without -o" "$tool" ckpt export "$ck"

# Damage. Flip one byte inside model/w's data (its offset from h5py).
cp "$step2" "$work/flipped.h5"
$python - "$work/flipped.h5" <<'PY' || check_failed "could not flip a byte"
import sys, h5py
path = sys.argv[1]
with h5py.File(path, "r") as f:
    offset = f["model/w"].id.get_offset()
with open(path, "r+b") as f:
    f.seek(offset + 3 * 1024 * 256 * 4 + 123)  # row 3072: in rank 2's rows [2730, 4095)
    b = f.read(1)
    f.seek(-1, 1)
    f.write(bytes([b[0] ^ 0x01]))
PY
expect 1 "verify flipped" "$tool" ckpt verify "$work/flipped.h5"
contains "$work/out" "DAMAGED model/w: rows [2730, 4095) saved by rank 2 are damaged" "verify flipped"
contains "$work/err" "1 of 4 tensors damaged" "verify flipped summary"
expect 1 "show flipped" "$tool" ckpt show "$work/flipped.h5" model/w
contains "$work/err" "fail their checksum" "show flipped"
expect 1 "load flipped at np 2" mpi 2 "$driver" load "$work/flipped.h5" --mib 8 --layout full
contains "$work/err" "tensor model/w rows [2730, 4095) saved by rank 2 fail their checksum" "load flipped"

head -c 5000000 "$step2" > "$work/truncated.h5"
expect 1 "verify truncated" "$tool" ckpt verify "$work/truncated.h5"
contains "$work/err" "cannot open checkpoint $work/truncated.h5 (truncated or damaged file?)" "truncated"
[ "$(wc -l < "$work/err")" -eq 1 ] || check_failed "truncated: error is not one line"

$python -c 'import h5py,sys; h5py.File(sys.argv[1],"w")["x"]=[1,2,3]' "$work/foreign.h5"
expect 1 "verify foreign" "$tool" ckpt verify "$work/foreign.h5"
contains "$work/err" "not an mpiaccel checkpoint: $work/foreign.h5 (format attribute missing)" "foreign"
expect 1 "ls of a missing directory" "$tool" ckpt ls "$work/nope"
contains "$work/err" "mpiaccel: ckpt: checkpoint path $work/nope does not exist" "missing dir"

# The original is untouched by all of the above.
expect 0 "verify original again" "$tool" ckpt verify "$ck"
finish
