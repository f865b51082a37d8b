// ctest: links mpiaccel; timeout 120
// Loader worker threads ([train] num_workers): the batches, their order and
// the resumable state are those of a loader without workers, at any world
// size, across epochs, with and without drop_last; the workers fetch ahead;
// a dataset's error reaches next() at its own batch; nothing hangs.
#define BOOST_TEST_MODULE loader_workers
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>

#include <atomic>
#include <chrono>
#include <string>
#include <memory>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "mpiaccel/data.hpp"
#include "mpiaccel/error.hpp"

using mpiaccel::Batch;
using mpiaccel::DistributedLoader;
using mpiaccel::DistributedSampler;
using mpiaccel::LoaderOptions;
using mpiaccel::LoaderState;

namespace {

// Samples are their own indices; get() can be slowed, counts its calls, and
// throws for one chosen sample.
class IndexDataset : public mpiaccel::Dataset {
 public:
  explicit IndexDataset(int64_t size, int64_t poisoned = -1, int sleep_ms = 0)
      : size_(size), poisoned_(poisoned), sleep_ms_(sleep_ms) {}
  int64_t size() const override { return size_; }
  Batch get(const std::vector<int64_t>& indices) const override {
    ++calls;
    if (sleep_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms_));
    for (int64_t i : indices)
      if (i == poisoned_) throw std::runtime_error("sample " + std::to_string(i) + " is unreadable");
    at::Tensor t = at::tensor(indices, at::kLong);
    return {t, t * 10};
  }
  mutable std::atomic<int64_t> calls{0};

 private:
  int64_t size_, poisoned_;
  int sleep_ms_;
};

std::vector<int64_t> to_vector(const at::Tensor& t) {
  return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
}

LoaderOptions workers(int64_t n, int64_t prefetch = 2) {
  LoaderOptions o;
  o.num_workers = n;
  o.prefetch_factor = prefetch;
  return o;
}

DistributedLoader make(std::shared_ptr<const mpiaccel::Dataset> data, int rank, int world,
                       int64_t batch, bool drop_last, LoaderOptions options) {
  return DistributedLoader(data, DistributedSampler(data->size(), rank, world, 11, true, drop_last),
                           batch, "cpu", options);
}

// A rank's next `steps` batches: inputs, targets and the state after each.
struct Trace {
  std::vector<std::vector<int64_t>> inputs, targets;
  std::vector<LoaderState> states;
  bool operator==(const Trace& o) const {
    return inputs == o.inputs && targets == o.targets && states == o.states;
  }
};

Trace run(DistributedLoader& loader, int steps) {
  Trace t;
  for (int s = 0; s < steps; ++s) {
    const Batch b = loader.next();
    t.inputs.push_back(to_vector(b.input));
    t.targets.push_back(to_vector(b.target));
    t.states.push_back(loader.state());
  }
  return t;
}

}  // namespace

BOOST_AUTO_TEST_CASE(workers_give_the_batches_and_states_of_no_workers) {
  auto data = std::make_shared<IndexDataset>(37);
  for (int world : {1, 2, 3}) {
    for (bool drop_last : {true, false}) {
      for (int rank = 0; rank < world; ++rank) {
        DistributedLoader plain = make(data, rank, world, 4, drop_last, {});
        const Trace want = run(plain, 30);  // several epochs
        for (int64_t n : {1, 2, 3}) {
          for (int64_t prefetch : {1, 4}) {
            DistributedLoader fast = make(data, rank, world, 4, drop_last, workers(n, prefetch));
            BOOST_TEST((run(fast, 30) == want), "world " << world << " rank " << rank << " drop_last "
                                                          << drop_last << " workers " << n << "x" << prefetch);
            BOOST_TEST(fast.epoch() == plain.epoch());
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(resume_with_workers_at_another_world_size) {
  auto data = std::make_shared<IndexDataset>(101);
  // The uninterrupted run: 2 ranks x 4, no workers; a global step is a set.
  std::vector<DistributedLoader> straight;
  for (int r = 0; r < 2; ++r) straight.push_back(make(data, r, 2, 4, true, {}));
  std::vector<std::multiset<int64_t>> want;
  for (int s = 0; s < 40; ++s) {
    std::multiset<int64_t> step;
    for (auto& l : straight)
      for (int64_t i : to_vector(l.next().input)) step.insert(i);
    want.push_back(step);
  }
  // 2 ranks with 2 workers stop at step 17 (batches are in flight), and
  // 4 ranks x 2 with 1 worker continue.
  std::vector<DistributedLoader> first;
  for (int r = 0; r < 2; ++r) first.push_back(make(data, r, 2, 4, true, workers(2)));
  for (int s = 0; s < 17; ++s)
    for (auto& l : first) l.next();
  const LoaderState saved = first[0].state();
  BOOST_TEST((first[1].state() == saved));
  std::vector<DistributedLoader> after;
  for (int r = 0; r < 4; ++r) after.push_back(make(data, r, 4, 2, true, workers(1, 3)));
  for (auto& l : after) l.restore(saved);
  for (int s = 17; s < 40; ++s) {
    std::multiset<int64_t> step;
    for (auto& l : after)
      for (int64_t i : to_vector(l.next().input)) step.insert(i);
    BOOST_TEST((step == want[s]), "step " << s);
  }
  // restore() on a loader with batches in flight drops them.
  first[0].restore(LoaderState{0, 0});
  DistributedLoader fresh = make(data, 0, 2, 4, true, {});
  BOOST_TEST((run(first[0], 20) == run(fresh, 20)));
}

BOOST_AUTO_TEST_CASE(workers_fetch_ahead_of_the_training_thread) {
  auto data = std::make_shared<IndexDataset>(1000);
  DistributedLoader loader = make(data, 0, 1, 8, true, workers(2, 3));
  BOOST_TEST(loader.next_indices().size() == 8u);  // starts the workers; fetches nothing itself
  loader.next();
  // One batch taken: 2 x 3 more in flight, fetched without another next().
  for (int i = 0; i < 500 && data->calls.load() < 7; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  BOOST_TEST(data->calls.load() == 7);
  BOOST_TEST((loader.state() == LoaderState{0, 8}));
}

BOOST_AUTO_TEST_CASE(a_dataset_error_reaches_next_at_its_own_batch) {
  // The loader shuffles: find the step whose batch holds sample 13.
  auto probe = std::make_shared<IndexDataset>(64);
  int bad_step = -1;
  DistributedLoader scan = make(probe, 0, 1, 4, true, {});
  for (int s = 0; s < 16 && bad_step < 0; ++s) {
    for (int64_t i : to_vector(scan.next().input))
      if (i == 13) bad_step = s;
  }
  BOOST_TEST_REQUIRE(bad_step >= 0);
  auto data = std::make_shared<IndexDataset>(64, /*poisoned=*/13);
  DistributedLoader loader = make(data, 0, 1, 4, true, workers(2));
  for (int s = 0; s < bad_step; ++s) BOOST_CHECK_NO_THROW(loader.next());
  BOOST_CHECK_EXCEPTION(loader.next(), std::runtime_error, [](const std::runtime_error& e) {
    return std::string(e.what()) == "sample 13 is unreadable";
  });
}

BOOST_AUTO_TEST_CASE(destroying_a_loader_with_batches_in_flight_drops_them) {
  auto data = std::make_shared<IndexDataset>(200, -1, /*sleep_ms=*/50);
  {
    DistributedLoader loader = make(data, 0, 1, 4, true, workers(2, 4));
    loader.next();
  }  // 1 + 8 batches were asked for: the workers finish the ones being fetched and stop
  BOOST_TEST(data->calls.load() < 9);
}

BOOST_AUTO_TEST_CASE(bad_options_are_one_line) {
  auto data = std::make_shared<IndexDataset>(10);
  BOOST_CHECK_THROW(make(data, 0, 1, 2, true, workers(-1)), mpiaccel::Error);
  BOOST_CHECK_THROW(make(data, 0, 1, 2, true, workers(1, 0)), mpiaccel::Error);
}
