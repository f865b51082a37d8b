#pragma once
// The collective HDF5 section of a save (phases 3 and 4 of checkpoint_save.cpp):
// create the file and every object, write every rank's rows, flush, close.
// Also the types both halves of the save share.

#include <ATen/core/Tensor.h>
#include <mpi.h>

#include <map>
#include <string>
#include <vector>

#include "checkpoint/manifest/byte_codec.hpp"
#include "checkpoint/manifest/manifest.hpp"
#include "checkpoint/plan/shard_plan.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/state.hpp"

namespace mpiaccel::detail {

struct LocalShard {
  const ShardedTensor* tensor = nullptr;
  at::ScalarType dtype = at::kFloat;
  at::Tensor host;        // this rank's rows, CPU, contiguous
  int64_t rows = 0;       // rows of dim 0 of the whole tensor
  int64_t row_bytes = 0;
  int64_t bytes = 0;      // of the whole tensor
};

// What rank 0 decides for everyone: its tensor list is the reference and its
// metadata is what the file records.
struct SharedPlan {
  std::string layout;  // one line per tensor
  std::string strategy, config_text, created_utc;
  std::map<std::string, std::string> trainer, attributes;

  std::string encode() const {
    ByteWriter w;
    w.str(layout);
    w.str(strategy);
    w.str(config_text);
    w.str(created_utc);
    for (const auto* m : {&trainer, &attributes}) {
      w.u64(m->size());
      for (const auto& [k, v] : *m) {
        w.str(k);
        w.str(v);
      }
    }
    return w.take();
  }
  static SharedPlan decode(const std::string& bytes) {
    ByteReader r(bytes);
    SharedPlan p;
    p.layout = r.str();
    p.strategy = r.str();
    p.config_text = r.str();
    p.created_utc = r.str();
    for (auto* m : {&p.trainer, &p.attributes})
      for (uint64_t n = r.u64(); n > 0; --n) {
        std::string k = r.str();
        (*m)[k] = r.str();
      }
    return p;
  }
};

struct WriteInput {
  MPI_Comm world = MPI_COMM_NULL;
  int rank = 0, size = 1;
  int64_t step = 0;
  std::string dir, tmp_path;
  const std::vector<LocalShard>* shards = nullptr;
  const SharedPlan* plan = nullptr;
  std::vector<ShardRecord> my_records;  // this rank's, CRCs still 0
  std::vector<size_t> record_tensor;    // the index in *shards of each of my_records
  ShardTablePlan table;                 // where my_records go; records per tensor
  size_t name_length = 1;
  std::vector<int64_t> rng_sizes;  // per rank
  const std::string* rng_state = nullptr;
  std::string* timing = nullptr;  // out: this rank's phase 4 times, for the debug log
};

/// Phases 3 and 4. Every exception leaving it has been agreed on (thrown by
/// all_ok on every rank), so RAII closes during unwinding happen on every rank
/// alike. Collective over comm: every rank calls it, in the same order.
void write_file(Communicator& comm, const WriteInput& in);

}  // namespace mpiaccel::detail
