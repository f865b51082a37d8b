// ctest: links mpiaccel; np 1 2 3; timeout 600
// Injected I/O faults, as leveldb's fault-injection Env does: a save (and a
// load) is first run with a counting FileSystem, which numbers every system
// call it makes on each rank; then, for every call number and every fault
// that call can have (ENOSPC, EIO, a short write or read, a failing fsync,
// rename, unlink, close, mkdir), the save runs again with that one call
// failing, on one rank and on all ranks. After each:
//   - no hang (collective deadlines; this test's timeout);
//   - either every rank throws the same one-line error, and the previous
//     checkpoint and `latest` are byte for byte as before and no .tmp is
//     left, or every rank succeeds (a fault the save survives: a retried
//     O_DIRECT write, a best-effort unlink) and the new checkpoint verifies;
//   - the next save, without the fault, succeeds and loads.
#define BOOST_TEST_MODULE checkpoint_io_faults
#include "support/mpi_test.hpp"

#include <ATen/ATen.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "checkpoint/io/file_system.hpp"
#include "mpiaccel/checkpoint.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/state.hpp"
#include "support/checkpoint_setup.hpp"

namespace fs = std::filesystem;
using namespace mpiaccel;
using namespace mpiaccel::test;

namespace {

enum class Call { Open, Pwrite, Pread, Write, Fsync, Fdatasync, Fallocate, Rename, Unlink, Close, Mkdir };

const char* call_name(Call c) {
  static const char* names[] = {"open",      "pwrite",    "pread",  "write",  "fsync", "fdatasync",
                                "fallocate", "rename",    "unlink", "close",  "mkdir"};
  return names[static_cast<int>(c)];
}

struct Fault {
  int64_t at = -1;  // the call number that fails; -1: none
  int err = EIO;
  bool short_transfer = false;  // pwrite/pread/write move half the bytes instead
};

// Numbers every call; fails call `at` as `fault` says.
class FaultyFileSystem final : public mpiaccel::detail::FileSystem {
 public:
  void arm(Fault fault) {
    fault_ = fault;
    count_ = 0;
    fired_ = false;
    std::lock_guard<std::mutex> lock(mutex_);
    calls_.clear();
  }
  int64_t count() const { return count_; }
  bool fired() const { return fired_; }
  std::vector<Call> calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }

  int open(const char* path, int flags, mode_t mode) override {
    return failing(Call::Open) ? -1 : real().open(path, flags, mode);
  }
  ssize_t pwrite(int fd, const void* data, size_t bytes, off_t offset) override {
    if (!failing(Call::Pwrite)) return real().pwrite(fd, data, bytes, offset);
    return fault_.short_transfer && bytes > 1 ? real().pwrite(fd, data, bytes / 2, offset) : -1;
  }
  ssize_t pread(int fd, void* data, size_t bytes, off_t offset) override {
    if (!failing(Call::Pread)) return real().pread(fd, data, bytes, offset);
    return fault_.short_transfer && bytes > 1 ? real().pread(fd, data, bytes / 2, offset) : -1;
  }
  ssize_t write(int fd, const void* data, size_t bytes) override {
    if (!failing(Call::Write)) return real().write(fd, data, bytes);
    return fault_.short_transfer && bytes > 1 ? real().write(fd, data, bytes / 2) : -1;
  }
  int fsync(int fd) override { return failing(Call::Fsync) ? -1 : real().fsync(fd); }
  int fdatasync(int fd) override { return failing(Call::Fdatasync) ? -1 : real().fdatasync(fd); }
  int fallocate(int fd, off_t offset, off_t bytes) override {
    return failing(Call::Fallocate) ? fault_.err : real().fallocate(fd, offset, bytes);
  }
  int rename(const char* from, const char* to) override {
    return failing(Call::Rename) ? -1 : real().rename(from, to);
  }
  int unlink(const char* path) override { return failing(Call::Unlink) ? -1 : real().unlink(path); }
  int close(int fd) override {
    if (!failing(Call::Close)) return real().close(fd);
    real().close(fd);  // a failed close still releases the descriptor (POSIX on Linux)
    return -1;
  }
  int mkdir(const char* path, mode_t mode) override {
    return failing(Call::Mkdir) ? -1 : real().mkdir(path, mode);
  }

 private:
  static mpiaccel::detail::FileSystem& real() { return mpiaccel::detail::real_file_system(); }
  bool failing(Call call) {
    const int64_t n = count_++;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      calls_.push_back(call);
    }
    if (n != fault_.at) return false;
    fired_ = true;
    errno = fault_.err;
    return true;
  }

  Fault fault_;
  std::atomic<int64_t> count_{0};
  std::atomic<bool> fired_{false};
  mutable std::mutex mutex_;
  std::vector<Call> calls_;
};

FaultyFileSystem& faulty() {
  static FaultyFileSystem fs;
  return fs;
}

// Installs the faulty FileSystem for this test module.
struct Installed {
  Installed() { mpiaccel::detail::replace_file_system(&faulty()); }
  ~Installed() { mpiaccel::detail::replace_file_system(nullptr); }
};
BOOST_TEST_GLOBAL_FIXTURE(Installed);

// 64 KiB rows: the bulk goes through O_DIRECT, the edges through the page cache.
ShardedStateDict state_at(int64_t step) {
  ShardedStateDict state;
  const at::Tensor full = at::arange(48 * 4096, at::kFloat).reshape({48, 4096}) + static_cast<double>(step);
  state.tensors = {shard_of("model/w", full), shard_of("model/b", at::arange(5, at::kLong) * step)};
  return state;
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

// The faults a call can have.
std::vector<Fault> faults_for(Call call) {
  switch (call) {
    case Call::Pwrite:
    case Call::Write:
      return {{0, ENOSPC, false}, {0, EIO, false}, {0, EIO, true}};
    case Call::Pread:
      return {{0, EIO, false}, {0, EIO, true}};
    case Call::Fallocate:
      return {{0, ENOSPC, false}, {0, EIO, false}};
    default:
      return {{0, EIO, false}};
  }
}

// What every rank saw: "" for success, else the one error all ranks threw.
std::string agreed_outcome(const std::string& mine, const std::string& what) {
  const auto all = world().all_gather_bytes(mine);
  for (const auto& m : all) {
    if (m != all[0]) {
      BOOST_ERROR(what << ": ranks disagree: '" << all[0] << "' against '" << m << "'");
      break;
    }
  }
  BOOST_CHECK_MESSAGE(all[0].find('\n') == std::string::npos, what << ": not one line: " << all[0]);
  return all[0];
}

// "pwrite: No space left on device" for the fault that fired on the lowest
// rank where one did, "" when none fired (the call number is past the calls
// that rank made).
std::string fired_label(Call kind, const Fault& fault) {
  std::string mine;
  if (faulty().fired())
    mine = std::string(call_name(kind)) + ": " + (fault.short_transfer ? "short transfer" : std::strerror(fault.err));
  for (const auto& label : world().all_gather_bytes(mine))
    if (!label.empty()) return label;
  return "";
}

// Rank 0's tally of outcomes per injected fault, printed at the end.
struct Tally {
  std::map<std::string, std::pair<int, int>> by_fault;  // failed cleanly, survived
  void add(const std::string& label, bool failed, bool everywhere) {
    if (label.empty()) return;
    auto& t = by_fault[label + (everywhere ? " (all ranks)" : " (one rank)")];
    (failed ? t.first : t.second) += 1;
  }
  void print(const char* what) const {
    if (world().rank() != 0) return;
    for (const auto& [label, counts] : by_fault)
      BOOST_TEST_MESSAGE(what << " | " << label << " | failed cleanly " << counts.first
                              << " | survived " << counts.second);
  }
};

// One injected fault: call number `at` (of this rank's calls; -1 here when
// this rank does not fail), on one rank or on all of them.
struct Trial {
  int64_t at = 0;
  Call kind = Call::Open;
  Fault fault;
  bool everywhere = false;
  std::string what;  // for messages
};

// Every trial of an operation whose clean run made `calls` on this rank: for
// each call number any rank reached and each fault that call's kind can
// have, once on rank (at % size) alone and once on every rank. Every rank
// runs the same trials (the counts are agreed).
void for_each_trial(const std::vector<Call>& calls, const char* op,
                    const std::function<void(const Trial&)>& body) {
  const int64_t mine = static_cast<int64_t>(calls.size());
  const int64_t most = world().all_reduce_int(mine, ReduceOp::Max);
  const int size = world().size(), rank = world().rank();
  for (int64_t at = 0; at < most; ++at) {
    const Call kind = at < mine ? calls[static_cast<size_t>(at)] : Call::Open;
    const std::vector<Fault> faults = faults_for(kind);
    const int64_t count = world().all_reduce_int(static_cast<int64_t>(faults.size()), ReduceOp::Max);
    for (int64_t f = 0; f < count; ++f) {
      for (const bool everywhere : {false, true}) {
        Trial t{at, kind, f < static_cast<int64_t>(faults.size()) ? faults[static_cast<size_t>(f)] : Fault{},
                everywhere, ""};
        t.fault.at = (everywhere || rank == static_cast<int>(at % size)) && at < mine ? at : -1;
        std::ostringstream what;
        what << op << " call " << at << " (" << call_name(kind) << " on rank " << rank << ") "
             << (t.fault.short_transfer ? "short" : std::strerror(t.fault.err)) << " on "
             << (everywhere ? "all ranks" : "one rank");
        t.what = what.str();
        body(t);
      }
    }
  }
}

// Runs `op` with the trial's fault armed; tallies and returns the outcome
// every rank agrees on ("" for success).
std::string run_with_fault(const Trial& t, Tally& tally, const std::function<void()>& op) {
  faulty().arm(t.fault);
  const std::string mine = error_of(op);
  const std::string label = fired_label(t.kind, t.fault);
  faulty().arm({});
  const std::string outcome = agreed_outcome(mine, t.what);
  tally.add(label, !outcome.empty(), t.everywhere);
  return outcome;
}

// A directory holding committed step 1, fresh for each trial.
struct Base {
  CheckpointDir dir{"ckpt_io_faults", 0, "/base"};
  std::string step1, latest;
  Base() {
    dir.ckpt.save(state_at(1), 1, meta_at(1));
    step1 = bytes_of(dir.path + "/step_00000001.h5");
    latest = bytes_of(dir.path + "/latest");
  }
  std::string fresh_copy(int trial) const {
    const std::string copy = dir.root.path + "/trial" + std::to_string(trial);
    if (world().rank() == 0) {
      fs::remove_all(copy);
      fs::copy(dir.path, copy);
    }
    world().barrier();
    return copy;
  }
};

// Per rank: the calls a clean run of `op` on a fresh copy makes.
std::vector<Call> calls_of(const Base& base, const std::function<void(const std::string&)>& op) {
  const std::string dir = base.fresh_copy(-1);
  faulty().arm({});
  op(dir);
  const auto calls = faulty().calls();
  faulty().arm({});
  return calls;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_fault_at_every_call_of_a_save) {
  Base base;
  const auto save_step2 = [](const std::string& dir) {
    Checkpointer ckpt(world_ptr(), dir, 0);
    ckpt.save(state_at(2), 2, meta_at(2));
  };
  const std::vector<Call> calls = calls_of(base, save_step2);
  BOOST_TEST_MESSAGE("rank " << world().rank() << ": a save makes " << calls.size() << " calls");
  int trial = 0;
  Tally tally;
  for_each_trial(calls, "save", [&](const Trial& t) {
    const std::string dir = base.fresh_copy(trial++);
    const std::string outcome = run_with_fault(t, tally, [&] { save_step2(dir); });
    const std::string& what = t.what;
    if (world().rank() == 0) {
      if (!outcome.empty()) {
        BOOST_CHECK_MESSAGE(bytes_of(dir + "/latest") == base.latest, what << ": latest changed");
        BOOST_CHECK_MESSAGE(bytes_of(dir + "/step_00000001.h5") == base.step1, what << ": step 1 changed");
        const std::set<std::string> expected = {"latest", "step_00000001.h5"};
        BOOST_CHECK_MESSAGE(names_in(dir) == expected, what << ": files left behind");
      } else {
        BOOST_CHECK_MESSAGE(bytes_of(dir + "/latest") == "step_00000002.h5\n", what);
        BOOST_CHECK_MESSAGE(CheckpointReader(dir + "/step_00000002.h5").verify().empty(), what);
      }
    }
    // The fault gone, the next save succeeds and loads.
    Checkpointer ckpt(world_ptr(), dir, 0);
    ckpt.save(state_at(3), 3, meta_at(3));
    ShardedStateDict loaded = state_at(0);
    ckpt.load(dir, loaded);
    const ShardedStateDict want = state_at(3);
    MPIACCEL_CHECK_ALL(at::equal(loaded.tensors[0].local, want.tensors[0].local) &&
                       at::equal(loaded.tensors[1].local, want.tensors[1].local));
  });
  tally.print("save");
}

BOOST_AUTO_TEST_CASE(a_fault_at_every_call_of_a_load) {
  Base base;
  const auto load = [](const std::string& dir) {
    Checkpointer ckpt(world_ptr(), dir, 0);
    ShardedStateDict targets = state_at(0);
    ckpt.load(dir, targets);
    const ShardedStateDict want = state_at(1);
    MPIACCEL_CHECK(at::equal(targets.tensors[0].local, want.tensors[0].local) &&
                       at::equal(targets.tensors[1].local, want.tensors[1].local),
                   "loaded values differ");
  };
  const std::vector<Call> calls = calls_of(base, load);
  const std::string dir = base.fresh_copy(0);
  Tally tally;
  for_each_trial(calls, "load", [&](const Trial& t) {
    // Fails alike everywhere, or loads the right values; then loads once the fault is gone.
    run_with_fault(t, tally, [&] { load(dir); });
    load(dir);
  });
  MPIACCEL_CHECK_ALL(world().rank() != 0 || bytes_of(dir + "/step_00000001.h5") == base.step1);
  tally.print("load");
}
