// ctest: links mpiaccel; timeout 60
// state module, single process: row partitions, optimizer slots, replicated
// state dicts (row spreading needs no communication, so rank/size are given).
#define BOOST_TEST_MODULE state
#include <boost/test/unit_test.hpp>

#include <torch/torch.h>

#include "mpiaccel/error.hpp"
#include "mpiaccel/state.hpp"
#include "state/optimizer_state.hpp"
#include "state/replicated_state.hpp"

using namespace mpiaccel;

BOOST_AUTO_TEST_CASE(even_row_range_covers_rows_once) {
  for (int64_t rows : {0, 1, 5, 7, 12, 13})
    for (int parts = 1; parts <= 5; ++parts) {
      int64_t next = 0, smallest = rows, largest = 0;
      for (int i = 0; i < parts; ++i) {
        const RowRange r = even_row_range(rows, parts, i);
        BOOST_TEST(r.begin == next);
        next += r.count;
        smallest = std::min(smallest, r.count);
        largest = std::max(largest, r.count);
      }
      BOOST_TEST(next == rows);
      BOOST_TEST(largest - smallest <= 1);
    }
  BOOST_TEST(even_row_range(7, 3, 0).count == 3);  // the first rows % parts parts get one extra
  BOOST_TEST(even_row_range(7, 3, 2).begin == 5);
  BOOST_CHECK_THROW(even_row_range(4, 0, 0), Error);
  BOOST_CHECK_THROW(even_row_range(4, 2, 2), Error);
}

BOOST_AUTO_TEST_CASE(chunk_row_range_is_torch_chunk) {
  for (int64_t rows : {0, 1, 5, 7, 12, 13})
    for (int parts = 1; parts <= 5; ++parts) {
      const auto chunks = torch::arange(rows).chunk(parts);
      int64_t next = 0;
      for (int i = 0; i < parts; ++i) {
        const RowRange r = chunk_row_range(rows, parts, i);
        BOOST_TEST(r.begin == next);
        const int64_t expected = i < int(chunks.size()) ? chunks[i].numel() : 0;
        BOOST_TEST(r.count == expected, "rows " << rows << " parts " << parts << " part " << i);
        next += r.count;
      }
      BOOST_TEST(next == rows);
    }
}

BOOST_AUTO_TEST_CASE(optimizer_slots_adamw_and_sgd) {
  torch::manual_seed(0);
  torch::nn::Linear fc(4, 3);
  torch::optim::AdamW adamw(fc->parameters(), torch::optim::AdamWOptions(1e-2).amsgrad(true));
  BOOST_TEST(optimizer_kind(adamw) == "adamw");
  BOOST_TEST(optimizer_slots(adamw, fc->weight).empty());  // no state before the first step
  fc->forward(torch::randn({2, 4})).sum().backward();
  adamw.step();
  adamw.step();
  auto slots = optimizer_slots(adamw, fc->weight);
  BOOST_TEST_REQUIRE(slots.size() == 3u);
  BOOST_TEST(slots[0].name == "exp_avg");
  BOOST_TEST(slots[2].name == "max_exp_avg_sq");
  BOOST_TEST(optimizer_param_step(adamw, fc->weight) == 2);
  BOOST_TEST(optimizer_step(adamw) == 2);
  // The slot is the optimizer's own tensor.
  slots[0].tensor.fill_(3);
  BOOST_TEST(optimizer_slots(adamw, fc->weight)[0].tensor.sum().item<double>() == 36);

  torch::optim::SGD plain(fc->parameters(), torch::optim::SGDOptions(0.1));
  BOOST_TEST(optimizer_slots(plain, fc->weight, true).empty());  // no momentum, no state
  torch::optim::SGD momentum(fc->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  auto created = optimizer_slots(momentum, fc->weight, /*create_missing=*/true);
  BOOST_TEST_REQUIRE(created.size() == 1u);
  BOOST_TEST(created[0].name == "momentum_buffer");
  BOOST_TEST(created[0].tensor.sizes() == fc->weight.sizes());
  BOOST_TEST(optimizer_attributes(momentum).at("optimizer.group0.momentum") == "0.90000000000000002");
}

BOOST_AUTO_TEST_CASE(replicated_state_dict_spreads_rows_and_loads_all) {
  torch::manual_seed(0);
  torch::nn::Sequential model(torch::nn::Linear(4, 5), torch::nn::BatchNorm1d(5));
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(1e-2));
  model->forward(torch::randn({3, 4})).sum().backward();
  adam.step();
  const int size = 3;
  std::map<std::string, int64_t> rows;
  for (int rank = 0; rank < size; ++rank) {
    const ShardedStateDict dict = replicated_state_dict(*model, adam, rank, size);
    BOOST_TEST(dict.attributes.at("optimizer") == "adam");
    for (const ShardedTensor& t : dict.tensors) {
      rows[t.name] += t.row_count;
      BOOST_TEST(t.local.size(0) == t.row_count);
      BOOST_TEST(t.local.is_contiguous());
    }
    if (rank == 1) {
      // "model/0.weight" is [5, 4]: rank 1 holds rows 2..3.
      const auto& w = dict.tensors[0];
      BOOST_TEST(w.name == "model/0.weight");
      BOOST_TEST(w.row_begin == 2);
      BOOST_TEST(torch::equal(w.local, model[0]->as<torch::nn::Linear>()->weight.narrow(0, 2, 2)));
    }
  }
  BOOST_TEST(rows.at("model/0.weight") == 5);
  BOOST_TEST(rows.at("model/1.num_batches_tracked") == 1);  // a 0-d buffer is one row
  BOOST_TEST(rows.at("optim/0.weight/exp_avg") == 5);
  BOOST_TEST(rows.at("optim/0.weight/step") == 1);
  // RankZero: rank 0 writes every row, others none.
  BOOST_TEST(replicated_state_dict(*model, adam, 1, 2, RowOwnership::RankZero).tensors[0].row_count == 0);

  // Load: a fresh optimizer gets its slots created; every rank receives all rows.
  torch::optim::Adam fresh(model->parameters(), torch::optim::AdamOptions(1e-2));
  ReplicatedLoad load = replicated_load_targets(*model, fresh);
  for (ShardedTensor& t : load.targets.tensors) {
    BOOST_TEST(t.row_begin == 0);
    BOOST_TEST(t.row_count == (t.global_shape.empty() ? 1 : t.global_shape[0]));
    if (t.name == "optim/0.weight/step") t.local.fill_(7);  // what the checkpoint would write
    if (t.name == "optim/0.weight/exp_avg") t.local.fill_(0.5);
  }
  load.finish(fresh);
  auto& w = model[0]->as<torch::nn::Linear>()->weight;
  BOOST_TEST(optimizer_param_step(fresh, w) == 7);
  BOOST_TEST(optimizer_slots(fresh, w)[0].tensor.mean().item<double>() == 0.5);
}
