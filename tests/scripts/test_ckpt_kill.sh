# ctest: timeout 180
# A rank SIGKILLed in the middle of a save: the job ends with an error (not a
# hang), `latest` still names the previous checkpoint, which `mpiaccel ckpt
# verify` accepts and which loads; the half-written file is never loaded and
# the next successful save removes it.
set -u
build=$1
driver=$build/tests/ckpt_driver
tool=$build/bin/mpiaccel
for f in "$tool" "$driver"; do
  [ -x "$f" ] || { echo "FAIL: $f is missing; build targets mpiaccel_tool and ckpt_driver" >&2; exit 1; }
done
mpiexec=${MPIACCEL_MPIEXEC:-mpirun}
flags=${MPIACCEL_MPIEXEC_FLAGS:---oversubscribe $([ "$(id -u)" = 0 ] && echo --allow-run-as-root)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
fail() { echo "FAIL: $*" >&2; status=1; }
ck=$work/ckpt

start=$(date +%s)
# shellcheck disable=SC2086  # flags is a list of words
timeout 120 $mpiexec $flags -np 3 -x OMP_NUM_THREADS=1 -x CKPT_DRIVER_KILL_RANK=1 -x CKPT_DRIVER_KILL_STEP=2 \
  "$driver" save "$ck" 1 2 --mib 96 > "$work/out" 2> "$work/err"
rc=$?
elapsed=$(( $(date +%s) - start ))
echo "killed job: exit $rc after ${elapsed} s"
[ "$rc" -ne 0 ] || fail "the job with a killed rank exited 0"
[ "$rc" -ne 124 ] || fail "the job with a killed rank hung (timeout)"
grep -q "killing myself (SIGKILL) during the save of $ck/.step_00000002.h5.tmp" "$work/err" \
  || { fail "rank 1 was not killed during the save of step 2"; sed 's/^/  /' "$work/err" | head >&2; }
grep -q "saved $ck/step_00000001.h5" "$work/out" || fail "step 1 was not saved first"
[ "$(cat "$ck/latest")" = "step_00000001.h5" ] || fail "latest is '$(cat "$ck/latest")', expected step_00000001.h5"
[ ! -e "$ck/step_00000002.h5" ] || fail "step 2 was committed although a rank died"
ls -la "$ck"

"$tool" ckpt verify "$ck" > "$work/out" 2> "$work/err" || { fail "verify of the previous checkpoint"; cat "$work/err" >&2; }
grep -q "ok $ck/step_00000001.h5: step 1" "$work/out" || fail "verify did not check step 1"
# shellcheck disable=SC2086
$mpiexec $flags -np 2 -x OMP_NUM_THREADS=1 "$driver" load "$ck" --expect-step 1 --mib 96 --layout chunk \
  > "$work/out" 2> "$work/err" || { fail "load of the previous checkpoint"; cat "$work/err" >&2; }
grep -q "loaded step 1" "$work/out" || fail "did not load step 1"
# Resuming saves again: the leftover temporary file goes away.
# shellcheck disable=SC2086
$mpiexec $flags -np 3 -x OMP_NUM_THREADS=1 "$driver" save "$ck" 2 --mib 96 > "$work/out" 2> "$work/err" \
  || { fail "save after the crash"; cat "$work/err" >&2; }
[ "$(cat "$ck/latest")" = "step_00000002.h5" ] || fail "latest after the new save"
[ ! -e "$ck/.step_00000002.h5.tmp" ] || fail "the crashed save's temporary file is still there"
[ "$status" -eq 0 ] && echo "PASS"
exit $status
