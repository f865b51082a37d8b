// ctest: links mpiaccel; timeout 120
#define BOOST_TEST_MODULE sampler
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <memory>
#include <set>
#include <vector>

#include "mpiaccel/data.hpp"
#include "mpiaccel/error.hpp"

using mpiaccel::Batch;
using mpiaccel::DistributedLoader;
using mpiaccel::DistributedSampler;
using mpiaccel::LoaderState;

namespace {

// A dataset whose samples are their own indices: the batches say exactly
// which samples a loader chose.
class IndexDataset : public mpiaccel::Dataset {
 public:
  explicit IndexDataset(int64_t size) : size_(size) {}
  int64_t size() const override { return size_; }
  Batch get(const std::vector<int64_t>& indices) const override {
    at::Tensor t = at::tensor(indices, at::kLong);
    return {t, t};
  }

 private:
  int64_t size_;
};

std::vector<int64_t> to_vector(const at::Tensor& t) {
  return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
}

std::vector<DistributedLoader> loaders(int64_t n, int world, int64_t batch, bool drop_last = true,
                                       uint64_t seed = 7) {
  auto data = std::make_shared<IndexDataset>(n);
  std::vector<DistributedLoader> out;
  for (int r = 0; r < world; ++r) {
    out.emplace_back(data, DistributedSampler(n, r, world, seed, true, drop_last), batch);
  }
  return out;
}

// One global step: every rank's next batch, as the set of samples it covers.
std::multiset<int64_t> global_step(std::vector<DistributedLoader>& ranks) {
  std::multiset<int64_t> out;
  for (DistributedLoader& loader : ranks) {
    for (int64_t i : to_vector(loader.next().input)) out.insert(i);
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(rank_shards_are_disjoint_and_cover_the_data) {
  const int64_t n = 1000;
  for (int world : {1, 2, 3, 4, 7}) {
    std::vector<int64_t> all;
    for (int r = 0; r < world; ++r) {
      DistributedSampler sampler(n, r, world, 42);
      sampler.set_epoch(3);
      BOOST_TEST(sampler.num_samples() == n / world);
      for (int64_t i : sampler.indices()) all.push_back(i);
    }
    std::sort(all.begin(), all.end());
    BOOST_TEST((std::adjacent_find(all.begin(), all.end()) == all.end()), "world " << world);
    // drop_last drops at most world - 1 samples of the permutation's tail.
    BOOST_TEST(static_cast<int64_t>(all.size()) == n - n % world);
    BOOST_TEST(all.front() >= 0);
    BOOST_TEST(all.back() < n);
  }
}

BOOST_AUTO_TEST_CASE(padding_wraps_around_so_every_rank_gets_the_same_count) {
  const int64_t n = 10;
  const int world = 4;
  std::vector<int64_t> all;
  for (int r = 0; r < world; ++r) {
    DistributedSampler sampler(n, r, world, 1, true, /*drop_last=*/false);
    BOOST_TEST(sampler.num_samples() == 3);  // ceil(10 / 4)
    for (int64_t i : sampler.indices()) all.push_back(i);
  }
  BOOST_TEST(all.size() == 12u);
  std::set<int64_t> distinct(all.begin(), all.end());
  BOOST_TEST(distinct.size() == 10u);  // every sample, two of them twice
  // The padding repeats the permutation's head, as PyTorch's sampler does:
  // positions 10 and 11 (ranks 2 and 3) are positions 0 and 1 (ranks 0 and 1).
  std::vector<DistributedSampler> samplers;
  for (int r = 0; r < world; ++r) samplers.emplace_back(n, r, world, 1, true, false);
  BOOST_TEST(samplers[2].index(2) == samplers[0].index(0));
  BOOST_TEST(samplers[3].index(2) == samplers[1].index(0));
}

BOOST_AUTO_TEST_CASE(drop_last_and_padding_counts) {
  for (int64_t n : {1, 5, 8, 9, 101}) {
    for (int world : {1, 2, 3, 4}) {
      DistributedSampler dropped(n, world - 1, world, 0, true, true);
      DistributedSampler padded(n, world - 1, world, 0, true, false);
      BOOST_TEST(dropped.num_samples() == n / world);
      BOOST_TEST(padded.num_samples() == (n + world - 1) / world);
    }
  }
}

BOOST_AUTO_TEST_CASE(permutation_depends_on_seed_and_epoch_only) {
  const int64_t n = 500;
  DistributedSampler a(n, 0, 1, 1234);
  DistributedSampler b(n, 0, 1, 1234);
  a.set_epoch(5);
  // Draws from torch's generator must not change our order.
  at::manual_seed(99);
  (void)at::rand({100});
  b.set_epoch(5);
  BOOST_TEST(a.indices() == b.indices());

  std::vector<int64_t> epoch5 = a.indices();
  a.set_epoch(6);
  BOOST_TEST(a.indices() != epoch5);
  DistributedSampler other_seed(n, 0, 1, 1235);
  other_seed.set_epoch(5);
  BOOST_TEST(other_seed.indices() != epoch5);

  // A permutation of 0..n-1, and not the identity.
  std::vector<int64_t> sorted = epoch5;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < n; ++i) BOOST_TEST(sorted[static_cast<size_t>(i)] == i);
  BOOST_TEST(sorted != epoch5);
  BOOST_TEST(mpiaccel::epoch_permutation(n, 1234, 5) == epoch5);
}

BOOST_AUTO_TEST_CASE(permutation_is_pinned) {
  // The order is part of the checkpoint format: a resumed run must see the
  // same samples whatever the build or LibTorch version. These values come
  // from an independent Python transcription of the algorithm documented in
  // docs/data_and_models.md (splitmix64 + Lemire bounded draws + Fisher–Yates).
  BOOST_TEST((mpiaccel::epoch_permutation(10, 42, 0) ==
              std::vector<int64_t>{0, 3, 1, 9, 6, 2, 7, 5, 8, 4}));
  BOOST_TEST(
      (mpiaccel::epoch_permutation(20, 7, 3) ==
       std::vector<int64_t>{2, 13, 18, 9, 5, 10, 14, 3, 16, 15, 19, 8, 0, 17, 4, 6, 7, 12, 11, 1}));
}

BOOST_AUTO_TEST_CASE(no_shuffle_is_the_strided_identity) {
  DistributedSampler sampler(10, 1, 3, 5, /*shuffle=*/false);
  BOOST_TEST(sampler.indices() == (std::vector<int64_t>{1, 4, 7}));
}

BOOST_AUTO_TEST_CASE(loader_resume_gives_the_uninterrupted_sequence) {
  const int64_t n = 203;
  const int world = 3;
  const int64_t batch = 5;
  // 203 / 3 = 67 per rank, 13 full batches per epoch: 40 steps cross 3 epochs.
  std::vector<DistributedLoader> straight = loaders(n, world, batch);
  std::vector<std::vector<std::vector<int64_t>>> expected(world);
  for (int step = 0; step < 40; ++step) {
    for (int r = 0; r < world; ++r) expected[r].push_back(to_vector(straight[r].next().input));
  }
  BOOST_TEST(straight[0].epoch() == 3);

  for (int stop : {0, 1, 12, 13, 14, 27}) {
    std::vector<DistributedLoader> first = loaders(n, world, batch);
    for (int step = 0; step < stop; ++step) {
      for (int r = 0; r < world; ++r) first[r].next();
    }
    const LoaderState saved = first[0].state();
    for (int r = 1; r < world; ++r) BOOST_TEST((first[r].state() == saved));

    std::vector<DistributedLoader> resumed = loaders(n, world, batch);
    for (int r = 0; r < world; ++r) resumed[r].restore(saved);
    for (int step = stop; step < 40; ++step) {
      for (int r = 0; r < world; ++r) {
        BOOST_TEST(to_vector(resumed[r].next().input) == expected[r][step],
                   "stop " << stop << " step " << step << " rank " << r);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(every_batch_is_full_and_epochs_advance) {
  std::vector<DistributedLoader> ranks = loaders(50, 2, 4);  // 25 per rank: 6 batches, 1 dropped
  BOOST_TEST(ranks[0].batches_per_epoch() == 6);
  std::set<int64_t> epoch0;
  for (int step = 0; step < 6; ++step) {
    for (int64_t i : global_step(ranks)) BOOST_TEST(epoch0.insert(i).second);
  }
  BOOST_TEST(epoch0.size() == 48u);
  BOOST_TEST(ranks[0].epoch() == 0);
  BOOST_TEST(global_step(ranks).size() == 8u);
  BOOST_TEST(ranks[0].epoch() == 1);
  BOOST_TEST((ranks[1].state() == LoaderState{1, 8}));
}

BOOST_AUTO_TEST_CASE(padded_loader_ends_an_epoch_with_a_short_batch) {
  std::vector<DistributedLoader> ranks = loaders(10, 2, 4, /*drop_last=*/false);
  BOOST_TEST(ranks[0].batches_per_epoch() == 2);
  BOOST_TEST(global_step(ranks).size() == 8u);
  BOOST_TEST(global_step(ranks).size() == 2u);  // 5 per rank: 4 then 1
  BOOST_TEST(global_step(ranks).size() == 8u);
  BOOST_TEST(ranks[0].epoch() == 1);
}

BOOST_AUTO_TEST_CASE(world_size_change_keeps_the_global_position) {
  // 2 ranks x 4 and 4 ranks x 2 and 1 rank x 8: one global batch of 8.
  const int64_t n = 100;  // 12 global steps per epoch, 4 samples dropped
  std::vector<DistributedLoader> straight = loaders(n, 2, 4);
  std::vector<std::multiset<int64_t>> expected;
  for (int step = 0; step < 30; ++step) expected.push_back(global_step(straight));

  std::vector<DistributedLoader> before = loaders(n, 2, 4);
  for (int step = 0; step < 3; ++step) global_step(before);
  const LoaderState saved = before[0].state();
  BOOST_TEST((saved == LoaderState{0, 24}));

  std::vector<DistributedLoader> after = loaders(n, 4, 2);
  for (DistributedLoader& loader : after) loader.restore(saved);
  for (int step = 3; step < 30; ++step) {
    BOOST_TEST((global_step(after) == expected[step]), "step " << step);
  }

  // And back down to one rank, from mid-epoch of the 4-rank run.
  std::vector<DistributedLoader> single = loaders(n, 1, 8);
  single[0].restore(after[0].state());
  for (int step = 30; step < 40; ++step) {
    std::multiset<int64_t> got = global_step(single);
    std::multiset<int64_t> want = global_step(straight);
    BOOST_TEST((got == want), "step " << step);
  }
}

BOOST_AUTO_TEST_CASE(restore_mid_round_keeps_counts_equal) {
  // A position that is not a multiple of the new world size (6 with 4 ranks):
  // the rest of the epoch is still split evenly and disjointly.
  const int64_t n = 23;
  std::set<int64_t> seen;
  int64_t count = -1;
  for (int r = 0; r < 4; ++r) {
    DistributedSampler sampler(n, r, 4, 3);
    sampler.set_epoch(0, 6);
    if (count < 0) count = sampler.num_samples();
    BOOST_TEST(sampler.num_samples() == count);
    for (int64_t i : sampler.indices()) BOOST_TEST(seen.insert(i).second);
  }
  BOOST_TEST(count == 4);  // (23 - 6) / 4, the tail of 1 dropped
  std::vector<int64_t> perm = mpiaccel::epoch_permutation(n, 3, 0);
  for (int64_t p = 6; p < 22; ++p) BOOST_TEST(seen.count(perm[static_cast<size_t>(p)]) == 1u);
}

BOOST_AUTO_TEST_CASE(resume_seeks_without_reading_skipped_samples) {
  // A dataset that counts what it is asked for: a far resume reads one batch.
  class CountingDataset : public IndexDataset {
   public:
    using IndexDataset::IndexDataset;
    Batch get(const std::vector<int64_t>& indices) const override {
      fetched += static_cast<int64_t>(indices.size());
      return IndexDataset::get(indices);
    }
    mutable int64_t fetched = 0;
  };
  auto data = std::make_shared<CountingDataset>(1000000);
  DistributedLoader loader(data, DistributedSampler(1000000, 1, 2, 9), 16);
  loader.restore({7, 640000});
  Batch batch = loader.next();
  BOOST_TEST(data->fetched == 16);
  BOOST_TEST((loader.state() == LoaderState{7, 640032}));
  DistributedSampler sampler(1000000, 1, 2, 9);
  sampler.set_epoch(7);
  BOOST_TEST(batch.input[0].item<int64_t>() == sampler.index(320000));
}

BOOST_AUTO_TEST_CASE(bad_arguments_are_errors) {
  BOOST_CHECK_THROW(DistributedSampler(0, 0, 1, 0), mpiaccel::Error);
  BOOST_CHECK_THROW(DistributedSampler(10, 2, 2, 0), mpiaccel::Error);
  BOOST_CHECK_THROW(DistributedSampler(10, -1, 2, 0), mpiaccel::Error);
  DistributedSampler sampler(10, 0, 2, 0);
  BOOST_CHECK_THROW(sampler.index(5), mpiaccel::Error);
  auto data = std::make_shared<IndexDataset>(10);
  // 5 samples per rank cannot fill a batch of 8.
  BOOST_CHECK_THROW(DistributedLoader(data, DistributedSampler(10, 0, 2, 0), 8), mpiaccel::Error);
  BOOST_CHECK_THROW(DistributedLoader(data, DistributedSampler(11, 0, 2, 0), 2), mpiaccel::Error);
}
