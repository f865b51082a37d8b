#!/bin/bash
# Train on this workstation: NP ranks under mpirun, bound to cores, with the
# flags `mpiaccel launch` derives from the machine (docs/cluster.md).
#
#   jobs/local/train.sh NP CONFIG [section.key=value ...]
#   jobs/local/train.sh 2 jobs/fortunes-gpt.ini train.max_steps=150
#
# MPIACCEL (default: build/bin/mpiaccel of this checkout, else mpiaccel on
# PATH) is the binary; MPIACCEL_DRY_RUN=1 prints the mpirun command instead.
# Exit status: the trainer's (0 finished, 1 failed, 2 usage, 3 pre-empted
# after a checkpoint: run again with checkpoint.resume=latest to continue).
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 NP CONFIG [section.key=value ...]" >&2
  exit 2
fi
np=$1
config=$2
shift 2

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [ -z "${MPIACCEL:-}" ]; then
  if [ -x "$repo/build/bin/mpiaccel" ]; then
    MPIACCEL=$repo/build/bin/mpiaccel
  elif command -v mpiaccel > /dev/null; then
    MPIACCEL=$(command -v mpiaccel)
  else
    echo "$0: no mpiaccel binary: build it (make) or set MPIACCEL=/path/to/mpiaccel" >&2
    exit 2
  fi
fi

dry=()
[ "${MPIACCEL_DRY_RUN:-0}" = 1 ] && dry=(--dry-run)
# One machine, mpirun, NP ranks: the rest of [launch] (cpus_per_process,
# mpirun_args) comes from CONFIG; `mpiaccel launch` appends --config CONFIG to
# the train command. exec: Ctrl-C and SIGUSR1 reach mpirun, which forwards
# them to the ranks.
exec "$MPIACCEL" launch "${dry[@]}" --config "$config" \
  launch.num_machines=1 launch.num_processes="$np" launch.launcher=mpirun \
  -- "$MPIACCEL" train "$@"
