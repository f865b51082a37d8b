#pragma once
// The file-system side of a checkpoint directory: names, the commit by
// rename, `latest`, retention. Everything here runs on one rank (rank 0) or in
// one process; a crash at any point leaves either the previous state or the
// new one, never a `latest` naming a file that is not complete.

#include <cstdint>
#include <string>
#include <vector>

namespace mpiaccel::detail {

/// "step_00000100.h5"
std::string checkpoint_file_name(int64_t step);
/// ".step_00000100.h5.tmp"
std::string temporary_file_name(int64_t step);
/// DIR/NAME without doubling a slash.
std::string join_path(const std::string& dir, const std::string& name);

/// Creates `dir` and its parents (mode 0755). Throws with the errno text.
void make_directories(const std::string& dir);
/// fsync of a file or directory by path. Throws with the errno text.
void fsync_path(const std::string& path, bool directory);
/// Free bytes for an unprivileged writer in `dir`'s file system (statvfs), or -1 if unknown.
/// MPI-IO creates files 0666 & ~umask: takes write permission away from
/// others, whatever the umask (a checkpoint is never world-writable). Throws.
void never_world_writable(const std::string& path);

int64_t available_bytes(const std::string& dir);

/// Renames DIR/tmp_name to DIR/final_name, fsyncs DIR, writes DIR/latest.tmp
/// (naming final_name), fsyncs it, renames it to DIR/latest and fsyncs DIR.
/// If writing `latest` fails, the renamed file is removed again (so the
/// directory is as before) and the error thrown.
void commit_checkpoint(const std::string& dir, const std::string& tmp_name,
                       const std::string& final_name);

/// Removes committed checkpoints older than the newest `keep_last` (never
/// the one `latest` names), and leftover .step_*.h5.tmp files of crashed
/// saves other than `keep_tmp`. Returns the removed paths. Best effort: a file
/// that cannot be removed is skipped (it is reported in the return value's
/// absence, and retried at the next save).
std::vector<std::string> prune_checkpoints(const std::string& dir, int64_t keep_last);

/// Committed checkpoints of `dir` (full paths), oldest step first.
std::vector<std::string> list_checkpoints(const std::string& dir);
/// A file path as is; a directory through DIR/latest. Throws with a clear
/// message for a missing path, a directory without `latest`, or a `latest`
/// naming a missing file.
std::string resolve_checkpoint(const std::string& path_or_dir);

}  // namespace mpiaccel::detail
