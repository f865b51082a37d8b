# ctest: timeout 180
# A rank SIGKILLed in the middle of a save: the job ends with an error (not a
# hang), `latest` still names the previous checkpoint, which `mpiaccel ckpt
# verify` accepts and which loads; the half-written file is never loaded and
# the next successful save removes it.
source "$(dirname "$0")/lib.sh" "$1"
use_ckpt_programs
work=$WORK
ck=$work/ckpt

start=$(date +%s)
mpi --timeout 120 3 -x CKPT_DRIVER_KILL_RANK=1 -x CKPT_DRIVER_KILL_STEP=2 \
  "$driver" save "$ck" 1 2 --mib 96 > "$work/out" 2> "$work/err"
rc=$?
elapsed=$(( $(date +%s) - start ))
echo "killed job: exit $rc after ${elapsed} s"
[ "$rc" -ne 0 ] || check_failed "the job with a killed rank exited 0"
[ "$rc" -ne 124 ] || check_failed "the job with a killed rank hung (timeout)"
grep -q "killing myself (SIGKILL) during the save of $ck/.step_00000002.h5.tmp" "$work/err" \
  || { check_failed "rank 1 was not killed during the save of step 2"; sed 's/^/  /' "$work/err" | head >&2; }
grep -q "saved $ck/step_00000001.h5" "$work/out" || check_failed "step 1 was not saved first"
[ "$(cat "$ck/latest")" = "step_00000001.h5" ] || check_failed "latest is '$(cat "$ck/latest")', expected step_00000001.h5"
[ ! -e "$ck/step_00000002.h5" ] || check_failed "step 2 was committed although a rank died"
ls -la "$ck"

"$tool" ckpt verify "$ck" > "$work/out" 2> "$work/err" || { check_failed "verify of the previous checkpoint"; cat "$work/err" >&2; }
grep -q "ok $ck/step_00000001.h5: step 1" "$work/out" || check_failed "verify did not check step 1"
mpi 2 "$driver" load "$ck" --expect-step 1 --mib 96 --layout chunk \
  > "$work/out" 2> "$work/err" || { check_failed "load of the previous checkpoint"; cat "$work/err" >&2; }
grep -q "loaded step 1" "$work/out" || check_failed "did not load step 1"
# Resuming saves again: the leftover temporary file goes away.
mpi 3 "$driver" save "$ck" 2 --mib 96 > "$work/out" 2> "$work/err" \
  || { check_failed "save after the crash"; cat "$work/err" >&2; }
[ "$(cat "$ck/latest")" = "step_00000002.h5" ] || check_failed "latest after the new save"
[ ! -e "$ck/.step_00000002.h5.tmp" ] || check_failed "the crashed save's temporary file is still there"
finish
