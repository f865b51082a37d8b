# ctest: timeout 120
# Checkpoints, `latest` and the directories a save creates follow the user's
# umask and are never world-writable (MPI-IO creates files 0666 & ~umask);
# `latest` that is a symbolic link, or that names one (which could lead out
# of the directory), is refused with one line.
source "$(dirname "$0")/lib.sh" "$1"
use_ckpt_programs
work=$WORK

for mask in 000 022 077; do
  ck=$work/u$mask/deep/ck
  (umask $mask && mpi 2 "$driver" save "$ck" 1 2 --mib 1 --keep 1) \
    > "$work/out" 2> "$work/err" || { cat "$work/err" >&2; fail "umask $mask: save"; }
  for p in "$work/u$mask/deep" "$ck" "$ck/latest" "$ck/step_00000002.h5"; do
    mode=$(stat -c %a "$p")
    echo "umask $mask: $mode ${p#"$work"/}"
    [ $((8#$mode & 8#002)) -eq 0 ] || fail "umask $mask: $p is world-writable ($mode)"
    [ $((8#$mode & 8#$mask & 8#666)) -eq 0 ] || fail "umask $mask: $p has bits the umask takes away ($mode)"
  done
done

ck=$work/u022/deep/ck
outside=$work/outside.h5
cp "$ck/step_00000002.h5" "$outside"
load() {
  mpi 2 "$driver" load "$ck" --expect-step 2 --mib 1 > "$work/out" 2> "$work/err"
}
ln -s "$outside" "$ck/step_00000009.h5"
echo "step_00000009.h5" > "$ck/latest"
load && fail "a latest naming a symbolic link was followed"
grep -q "names step_00000009.h5, which is not a regular file (a symbolic link?); refusing" "$work/err" \
  || { cat "$work/err" >&2; fail "link named by latest: message"; }
rm "$ck/latest"
ln -s "$outside" "$ck/latest"
load && fail "a latest that is a symbolic link was followed"
grep -q "latest is not a regular file (a symbolic link?); refusing" "$work/err" \
  || { cat "$work/err" >&2; fail "latest as a link: message"; }
for bad in "../../etc/passwd" "/etc/passwd"; do
  rm -f "$ck/latest"
  echo "$bad" > "$ck/latest"
  load && fail "latest naming $bad was followed"
  grep -q "does not name a checkpoint file (damaged \`latest\`)" "$work/err" \
    || { cat "$work/err" >&2; fail "latest naming $bad: message"; }
done
echo "PASS"
