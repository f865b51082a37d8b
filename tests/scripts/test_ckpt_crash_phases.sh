# ctest: timeout 300
# A crash at every phase of the commit (MPIACCEL_CKPT_CRASH_AT: the process
# SIGKILLs itself at a named point, so the test is not timing luck): during
# the data write, after close and before the rename, after the rename and
# before `latest`, during the prune of old checkpoints. After each: the job
# ended (no hang), `latest` names the newest committed checkpoint, which
# verifies and loads at another world size; no step that `latest` does not
# name is ever loaded; the next save succeeds and leaves no .tmp. Then
# `latest` naming a missing file is refused with the way out.
source "$(dirname "$0")/lib.sh" "$1"
use_ckpt_programs
work=$WORK

# phase:occurrence, saves, --keep, the step `latest` must name after the crash
cases=(
  "data-write:3 1,2,3 0 2"
  "before-rename:3 1,2,3 0 2"
  "before-latest:3 1,2,3 0 2"
  "during-prune:1 1,2,3 1 2"
)
for c in "${cases[@]}"; do
  read -r crash steps keep expect <<< "$c"
  phase=${crash%%:*}
  ck=$work/$phase
  mpi --timeout 120 3 -x MPIACCEL_CKPT_CRASH_AT="$crash" \
    "$driver" save "$ck" ${steps//,/ } --mib 8 --keep "$keep" > "$work/out" 2> "$work/err"
  rc=$?
  [ "$rc" -ne 0 ] || fail "$phase: the job that crashed exited 0"
  [ "$rc" -ne 124 ] || fail "$phase: the job hung after the crash (timeout)"
  grep -q "crash point $phase" "$work/err" || { head "$work/err" >&2; fail "$phase: no crash at $phase"; }
  latest=$(cat "$ck/latest")
  echo "$phase: exit $rc; latest = $latest; files: $(ls -A "$ck" | tr '\n' ' ')"
  [ "$latest" = "$(printf 'step_%08d.h5' "$expect")" ] || fail "$phase: latest names $latest, expected step $expect"
  "$tool" ckpt verify "$ck" > "$work/out" 2> "$work/err" || { cat "$work/err" >&2; fail "$phase: verify"; }
  mpi 2 "$driver" load "$ck" --expect-step "$expect" --mib 8 \
    --layout chunk > "$work/out" 2> "$work/err" || { cat "$work/err" >&2; fail "$phase: resume"; }
  # The next save commits and cleans up after the crashed one.
  mpi 3 "$driver" save "$ck" 3 --mib 8 --keep "$keep" \
    > "$work/out" 2> "$work/err" || { cat "$work/err" >&2; fail "$phase: save after the crash"; }
  [ "$(cat "$ck/latest")" = "step_00000003.h5" ] || fail "$phase: latest after the next save"
  if ls -A "$ck" | grep -q '\.tmp$'; then fail "$phase: a .tmp is left: $(ls -A "$ck")"; fi
done

# `latest` naming a file that is gone: refused, naming what remains.
ck=$work/data-write
rm "$ck/step_00000003.h5"
mpi 2 "$driver" load "$ck" --expect-step 3 --mib 8 \
  > "$work/out" 2> "$work/err" && fail "a latest naming a missing file was loaded"
grep -q "latest names step_00000003.h5, which does not exist; to resume from the newest that remains.*checkpoint.resume=$ck/step_00000002.h5" "$work/err" \
  || { cat "$work/err" >&2; fail "missing file: message"; }
echo "PASS"
