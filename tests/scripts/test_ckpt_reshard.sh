# ctest: timeout 300
# A checkpoint saved by 4 ranks loads at world sizes 1, 2 and 3 with even,
# torch.chunk and full-row layouts, and one saved by 3 ranks loads at 4:
# every value checked by every rank (ckpt_driver), RNG states restored only
# at the same world size.
set -u
build=$1
driver=$build/tests/ckpt_driver
[ -x "$driver" ] || { echo "FAIL: $driver is missing; build target ckpt_driver" >&2; exit 1; }
mpiexec=${MPIACCEL_MPIEXEC:-mpirun}
flags=${MPIACCEL_MPIEXEC_FLAGS:---oversubscribe $([ "$(id -u)" = 0 ] && echo --allow-run-as-root)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
run() {  # NP ARGS...
  local np=$1
  shift
  # shellcheck disable=SC2086  # flags is a list of words
  if ! $mpiexec $flags -np "$np" -x OMP_NUM_THREADS=1 "$driver" "$@" > "$work/out" 2> "$work/err"; then
    echo "FAIL: np $np: $*" >&2
    sed 's/^/  /' "$work/err" | head -20 >&2
    status=1
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
[ "$status" -eq 0 ] && echo "PASS"
exit $status
