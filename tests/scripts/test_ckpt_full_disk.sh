# ctest: timeout 180
# A full disk, for real: a 16 MiB tmpfs (needs root to mount). Two failures,
# each one clear error on every rank, nothing existing damaged:
#  - the tensors alone exceed the free space (caught before writing);
#  - the tensors fit but the whole file does not (ENOSPC when rank 0
#    reserves the file's blocks, after HDF5 created the objects collectively:
#    every rank still fails alike, the .tmp is removed).
# Afterwards `latest` names step 1, which verifies and loads.
source "$(dirname "$0")/lib.sh" "$1"
use_ckpt_programs
work=$WORK
disk=$work/disk
mkdir -p "$disk"
mount -t tmpfs -o size=16M tmpfs "$disk" 2> "$work/mount_err" \
  || fail "cannot mount a 16 MiB tmpfs for the full-disk test (run as root): $(cat "$work/mount_err")"
trap 'umount "$disk"; rm -rf "$work"' EXIT
run() {  # NP ARGS...
  local np=$1
  shift
  mpi --timeout 100 "$np" "$driver" "$@" > "$work/out" 2> "$work/err"
}
run 3 save "$disk" 1 --mib 2 || { check_failed "save of step 1"; cat "$work/err" >&2; }
cp "$disk/step_00000001.h5" "$work/step1.copy"

for case in "too-big:-1000000:not enough space for checkpoint step 2" \
            "metadata:0:No space left on device"; do
  name=${case%%:*}
  rest=${case#*:}
  minus=${rest%%:*}
  want=${rest#*:}
  run 3 save "$disk" 2 --fill-free-minus "$minus"
  rc=$?
  echo "[$name] exit $rc: $(grep -m1 ckpt_driver "$work/err" | cut -c1-300)"
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || check_failed "[$name] save on a full disk: exit $rc"
  n=$(grep -c "^ckpt_driver: .*$want" "$work/err")
  [ "$n" -eq 3 ] || { check_failed "[$name] expected '$want' from all 3 ranks, got $n"; sed 's/^/  /' "$work/err" | head >&2; }
  [ "$(cat "$disk/latest")" = "step_00000001.h5" ] || check_failed "[$name] latest changed"
  [ ! -e "$disk/step_00000002.h5" ] || check_failed "[$name] step 2 committed"
  [ ! -e "$disk/.step_00000002.h5.tmp" ] || check_failed "[$name] the temporary file was left behind"
  cmp -s "$disk/step_00000001.h5" "$work/step1.copy" || check_failed "[$name] step 1 changed"
done

"$tool" ckpt verify "$disk" > "$work/out" 2>&1 || { check_failed "verify step 1"; cat "$work/out" >&2; }
run 2 load "$disk" --expect-step 1 --mib 2 || { check_failed "load step 1"; cat "$work/err" >&2; }
finish
