#pragma once
// Deterministic crashes for the tests of the commit protocol
// (tests/scripts/test_ckpt_crash_phases.sh). With
// MPIACCEL_CKPT_CRASH_AT=PHASE[:N], the process SIGKILLs itself the N-th time
// (default 1) it reaches PHASE, after one line on stderr. The phases, in a
// save's order:
//   data-write     this rank has written its first tensor piece into the .tmp
//   before-rename  the .tmp is closed and synced, not yet renamed (rank 0)
//   before-latest  renamed to step_N.h5, `latest` not yet rewritten (rank 0)
//   during-prune   the first old checkpoint is removed, the others not (rank 0)
// Unset (always, outside tests), a call costs one getenv.

namespace mpiaccel::detail {

void crash_point(const char* phase);

}  // namespace mpiaccel::detail
