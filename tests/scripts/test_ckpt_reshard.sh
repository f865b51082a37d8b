# ctest: timeout 300
# A checkpoint saved by 4 ranks loads at world sizes 1, 2 and 3 with even,
# torch.chunk and full-row layouts, and one saved by 3 ranks loads at 4:
# every value checked by every rank (ckpt_driver), RNG states restored only
# at the same world size.
source "$(dirname "$0")/lib.sh" "$1"
use_ckpt_programs
work=$WORK
run() {  # NP ARGS...
  local np=$1
  shift
  if ! mpi "$np" "$driver" "$@" > "$work/out" 2> "$work/err"; then
    check_failed "np $np: $*"
    sed 's/^/  /' "$work/err" | head -20 >&2
  else
    grep -v '^\[rank' "$work/out"
  fi
}
run 4 save "$work/four" 7 --mib 6
for case in 1:full 2:even 2:full 3:even 3:chunk; do
  run "${case%%:*}" load "$work/four" --expect-step 7 --mib 6 --layout "${case#*:}"
done
run 4 load "$work/four" --expect-step 7 --mib 6 --layout chunk
run 3 save "$work/three" 9 --mib 6
run 4 load "$work/three" --expect-step 9 --mib 6 --layout even
finish
