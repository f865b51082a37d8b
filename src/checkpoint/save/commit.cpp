#include "checkpoint/save/commit.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "checkpoint/save/crash_point.hpp"
#include "checkpoint/io/file_system.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

// The names a save gives its files: step_<digits>.h5 (checkpoint_file_name:
// 8 digits or more) and .step_<digits>.h5.tmp while it is written. Prune,
// tmp cleanup and the listing of committed checkpoints consider no other
// name, and only regular files (is_regular_in): a user's step_5.h5 or
// notes.h5.tmp, or a directory or symbolic link called step_00000001.h5, is
// never touched. At most 18 digits: any step an int64 holds.
bool parse_step_name(const std::string& name, int64_t* step) {
  const std::string prefix = "step_", suffix = ".h5";
  if (name.size() < prefix.size() + 8 + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return false;
  *step = std::stoll(digits);
  return true;
}

bool is_stale_tmp(const std::string& name) {
  const std::string suffix = ".tmp";
  int64_t step = 0;
  return name.size() > 1 + suffix.size() && name[0] == '.' &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
         parse_step_name(name.substr(1, name.size() - 1 - suffix.size()), &step);
}

bool is_regular_in(const std::string& dir, const std::string& name) {
  struct stat st {};
  return ::lstat(join_path(dir, name).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<std::string> directory_entries(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return names;
  while (dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
  ::closedir(d);
  return names;
}

// (step, name) of the committed checkpoint files in `dir`, oldest first.
std::vector<std::pair<int64_t, std::string>> committed_files(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> committed;
  for (const auto& name : directory_entries(dir)) {
    int64_t step = 0;
    if (parse_step_name(name, &step) && is_regular_in(dir, name)) committed.emplace_back(step, name);
  }
  std::sort(committed.begin(), committed.end());
  return committed;
}

std::string read_latest(const std::string& dir) {
  std::ifstream in(join_path(dir, "latest"));
  std::string name;
  std::getline(in, name);
  while (!name.empty() && (name.back() == '\r' || name.back() == ' ')) name.pop_back();
  return name;
}

void write_file_synced(const std::string& path, const std::string& text) {
  int fd = file_system().open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0664);
  MPIACCEL_CHECK(fd >= 0, "cannot create " + path + ": " + errno_text(errno));
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = file_system().write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : ENOSPC;
      file_system().close(fd);
      file_system().unlink(path.c_str());
      MPIACCEL_THROW("cannot write " + path + ": " + errno_text(err));
    }
    done += static_cast<size_t>(n);
  }
  const bool synced = file_system().fsync(fd) == 0;
  int err = errno;
  const bool closed = file_system().close(fd) == 0;
  if (synced) err = errno;
  if (!synced || !closed) {
    file_system().unlink(path.c_str());
    MPIACCEL_THROW("cannot write " + path + ": " + errno_text(err));
  }
}

// Makes DIR/latest name `name`, through latest.tmp and a rename.
void point_latest_at(const std::string& dir, const std::string& name) {
  const std::string latest_tmp = join_path(dir, "latest.tmp");
  write_file_synced(latest_tmp, name + "\n");
  if (file_system().rename(latest_tmp.c_str(), join_path(dir, "latest").c_str()) != 0) {
    int err = errno;
    file_system().unlink(latest_tmp.c_str());
    MPIACCEL_THROW("cannot rename " + latest_tmp + " to latest: " + errno_text(err));
  }
}

}  // namespace

std::string checkpoint_file_name(int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "step_%08lld.h5", static_cast<long long>(step));
  return name;
}

std::string temporary_file_name(int64_t step) { return "." + checkpoint_file_name(step) + ".tmp"; }

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

void make_directories(const std::string& dir) {
  std::string partial;
  std::stringstream parts(dir);
  std::string part;
  if (!dir.empty() && dir[0] == '/') partial = "/";
  while (std::getline(parts, part, '/')) {
    if (part.empty()) continue;
    partial += part;
    if (file_system().mkdir(partial.c_str(), 0775) != 0 && errno != EEXIST)
      MPIACCEL_THROW("cannot create checkpoint directory " + partial + ": " + errno_text(errno));
    partial += "/";
  }
  struct stat st {};
  MPIACCEL_CHECK(::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode),
                 "checkpoint directory " + dir + " is not a directory");
}

void fsync_path(const std::string& path, bool directory) {
  int fd = file_system().open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC, 0);
  MPIACCEL_CHECK(fd >= 0, "cannot open " + path + " to sync it: " + errno_text(errno));
  int rc = file_system().fsync(fd);
  int err = errno;
  file_system().close(fd);
  MPIACCEL_CHECK(rc == 0, "fsync of " + path + " failed: " + errno_text(err));
}

void never_world_writable(const std::string& path) {
  struct stat st {};
  MPIACCEL_CHECK(::stat(path.c_str(), &st) == 0, "cannot stat " + path + ": " + errno_text(errno));
  if ((st.st_mode & S_IWOTH) == 0) return;
  MPIACCEL_CHECK(::chmod(path.c_str(), st.st_mode & ~S_IWOTH & 07777) == 0,
                 "cannot restrict the permissions of " + path + ": " + errno_text(errno));
}

int64_t available_bytes(const std::string& dir) {
  struct statvfs vfs {};
  if (::statvfs(dir.c_str(), &vfs) != 0) return -1;
  return static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
}

void commit_checkpoint(const std::string& dir, const std::string& tmp_name,
                       const std::string& final_name) {
  const std::string tmp = join_path(dir, tmp_name), final_path = join_path(dir, final_name);
  // The data must be durable before the name that promises it is.
  fsync_path(tmp, false);
  crash_point("before-rename");
  MPIACCEL_CHECK(file_system().rename(tmp.c_str(), final_path.c_str()) == 0,
                 "cannot rename " + tmp + " to " + final_path + ": " + errno_text(errno));
  const std::string previous = read_latest(dir);
  try {
    fsync_path(dir, true);
    crash_point("before-latest");
    point_latest_at(dir, final_name);
  } catch (...) {
    // `latest` still names the previous checkpoint: take the new file away too,
    // so the directory is exactly as before the save.
    file_system().unlink(final_path.c_str());
    throw;
  }
  try {
    fsync_path(dir, true);  // the new `latest` durable
  } catch (...) {
    // Not durable: undo, so that a crash cannot leave `latest` naming a file
    // that the same crash lost. Then the directory is as before the save.
    if (previous.empty())
      file_system().unlink(join_path(dir, "latest").c_str());
    else
      point_latest_at(dir, previous);
    file_system().unlink(final_path.c_str());
    throw;
  }
}

std::vector<std::string> prune_checkpoints(const std::string& dir, int64_t keep_last) {
  std::vector<std::string> removed;
  for (const auto& name : directory_entries(dir))
    if (is_stale_tmp(name) && is_regular_in(dir, name) &&
        file_system().unlink(join_path(dir, name).c_str()) == 0)
      removed.push_back(join_path(dir, name));
  if (keep_last <= 0) return removed;
  const std::string latest = read_latest(dir);
  const auto committed = committed_files(dir);
  const int64_t excess = static_cast<int64_t>(committed.size()) - keep_last;
  for (int64_t i = 0; i < excess; ++i) {
    const auto& name = committed[static_cast<size_t>(i)].second;
    if (name == latest) continue;
    if (file_system().unlink(join_path(dir, name).c_str()) == 0) removed.push_back(join_path(dir, name));
    crash_point("during-prune");
  }
  return removed;
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::string> paths;
  for (const auto& [step, name] : committed_files(dir)) paths.push_back(join_path(dir, name));
  return paths;
}

std::string resolve_checkpoint(const std::string& path_or_dir) {
  struct stat st {};
  MPIACCEL_CHECK(!path_or_dir.empty(), "checkpoint path is empty");
  MPIACCEL_CHECK(::stat(path_or_dir.c_str(), &st) == 0,
                 "checkpoint path " + path_or_dir + " does not exist");
  if (!S_ISDIR(st.st_mode)) return path_or_dir;
  const std::string latest_path = join_path(path_or_dir, "latest");
  MPIACCEL_CHECK(::lstat(latest_path.c_str(), &st) == 0,
                 "no committed checkpoint in " + path_or_dir + " (it has no `latest` file)");
  // Only what a save writes is followed: a regular `latest` naming a regular
  // file in the directory, never a link that may lead out of it.
  MPIACCEL_CHECK(S_ISREG(st.st_mode), latest_path + " is not a regular file (a symbolic link?); "
                                      "refusing to follow it: point checkpoint.resume at a file");
  const std::string name = read_latest(path_or_dir);
  MPIACCEL_CHECK(!name.empty() && name.find('/') == std::string::npos,
                 latest_path + " does not name a checkpoint file (damaged `latest`)");
  const std::string file = join_path(path_or_dir, name);
  if (::lstat(file.c_str(), &st) == 0)
    MPIACCEL_CHECK(S_ISREG(st.st_mode), latest_path + " names " + name +
                                            ", which is not a regular file (a symbolic link?); "
                                            "refusing to follow it: point checkpoint.resume at a file");
  if (::stat(file.c_str(), &st) != 0) {
    // Refused, not replaced by an older file: resuming from another step than
    // the one `latest` promises is the user's decision (docs/checkpoint.md).
    const std::vector<std::string> present = list_checkpoints(path_or_dir);
    MPIACCEL_THROW(latest_path + " names " + name + ", which does not exist" +
                   (present.empty() ? std::string("; the directory holds no other checkpoint")
                                    : "; to resume from the newest that remains, check it with "
                                      "`mpiaccel ckpt verify " + present.back() +
                                      "` and pass checkpoint.resume=" + present.back()));
  }
  return file;
}

}  // namespace mpiaccel::detail
