#pragma once
// Harness of the multi-rank Boost.Test suites (tests/mpi). Include it in the
// one source file of a test program, after defining BOOST_TEST_MODULE.
//
// - A global fixture owns the mpiaccel::Runtime (MPI) and the world
//   communicator for the whole program.
// - A watchdog aborts the job (MPI_Abort via mpiaccel::fatal) a little before
//   ctest's own timeout, so a hang fails with a message instead of silently
//   running into ctest's kill.
// - MPIACCEL_CHECK_ALL / MPIACCEL_REQUIRE_ALL agree on a condition across the
//   ranks first, so every rank fails the same check and no rank leaves a
//   collective early.
// - require_world_size(n) fails (never skips) when the world is too small.

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/log.hpp"
#include "mpiaccel/runtime.hpp"

namespace mpiaccel::test {

class MpiTestEnvironment {
 public:
  MpiTestEnvironment() {
    auto& suite = boost::unit_test::framework::master_test_suite();
    runtime_ = std::make_unique<Runtime>(&suite.argc, &suite.argv);
    world_ = make_mpi_world(*runtime_, std::chrono::seconds(timeout_seconds()));
    instance_ = this;
    watchdog_ = std::thread([this] { watch(); });
  }
  ~MpiTestEnvironment() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    watchdog_.join();
    world_.reset();
    instance_ = nullptr;
    runtime_.reset();
  }

  static MpiTestEnvironment& get() { return *instance_; }
  Runtime& runtime() { return *runtime_; }
  Communicator& world() { return *world_; }
  std::shared_ptr<Communicator> world_ptr() { return world_; }

  /// ctest's timeout for this test (MPIACCEL_TEST_TIMEOUT_S), default 120 s.
  static int timeout_seconds() {
    const char* text = std::getenv("MPIACCEL_TEST_TIMEOUT_S");
    int seconds = text ? std::atoi(text) : 120;
    return seconds > 0 ? seconds : 120;
  }

 private:
  void watch() {
    // Fire 90 % into ctest's budget so our message, not ctest's kill, ends it.
    auto budget = std::chrono::milliseconds(timeout_seconds() * 900);
    std::unique_lock<std::mutex> lock(mutex_);
    if (!cv_.wait_for(lock, budget, [this] { return done_; }))
      fatal("test watchdog: no result after " + std::to_string(budget.count() / 1000) +
            " s; a rank is stuck (a collective some rank never joined?)");
  }

  static inline MpiTestEnvironment* instance_ = nullptr;
  std::unique_ptr<Runtime> runtime_;
  std::shared_ptr<Communicator> world_;
  std::thread watchdog_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
};

inline Runtime& runtime() { return MpiTestEnvironment::get().runtime(); }
inline Communicator& world() { return MpiTestEnvironment::get().world(); }
inline std::shared_ptr<Communicator> world_ptr() { return MpiTestEnvironment::get().world_ptr(); }

/// True on every rank iff `ok` is true on every rank.
inline bool agree(bool ok) {
  return world().all_reduce_int(ok ? 1 : 0, ReduceOp::Min) == 1;
}

/// Fails the test (on every rank: world size is the same everywhere) when the
/// world is smaller than `n`. A multi-rank test never skips.
inline void require_world_size(int n) {
  BOOST_TEST_REQUIRE(world().size() >= n,
                     "this test needs at least " << n << " ranks, the world has "
                                                 << world().size());
}

}  // namespace mpiaccel::test

using MpiaccelTestEnvironmentFixture = ::mpiaccel::test::MpiTestEnvironment;
BOOST_TEST_GLOBAL_FIXTURE(MpiaccelTestEnvironmentFixture);

/// Checks `cond` on every rank after agreeing on it: if any rank fails, every
/// rank records the failure (and the failing rank's own message is logged).
#define MPIACCEL_CHECK_ALL(cond)                                                 \
  do {                                                                           \
    bool mpiaccel_local_ = static_cast<bool>(cond);                              \
    if (!mpiaccel_local_)                                                        \
      BOOST_TEST_MESSAGE("rank " << ::mpiaccel::test::world().rank()             \
                                 << ": check failed: " #cond);                   \
    BOOST_CHECK_MESSAGE(::mpiaccel::test::agree(mpiaccel_local_),                \
                        "on some rank: " #cond);                                 \
  } while (0)

#define MPIACCEL_REQUIRE_ALL(cond)                                               \
  do {                                                                           \
    bool mpiaccel_local_ = static_cast<bool>(cond);                              \
    BOOST_REQUIRE_MESSAGE(::mpiaccel::test::agree(mpiaccel_local_),              \
                          "on rank " << ::mpiaccel::test::world().rank()         \
                                     << (mpiaccel_local_ ? " (ok here)" : " (failed here)") \
                                     << ": " #cond);                             \
  } while (0)
