// Checkpoint metadata at scale (docs/checkpoint.md, "Scale in tensors and
// ranks"): a model of --tensors small tensors (default 2,000 of [64, 16]
// float32, 4 KiB each, 8 MiB in all), each sharded evenly over the ranks as
// FSDP shards them, saved and loaded back at the same world size, --reps
// times. Run oversubscribed at np 1..16: the bytes are few, so the times
// are the metadata work (agreement, plan, shard table, CRCs, manifest) and
// the collectives around it, not bandwidth. Prints the median save and load
// time (slowest rank) per np.
//
//   mpirun -np N bench_ckpt_metadata DIR [--tensors T] [--reps R]

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "mpiaccel/checkpoint.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/runtime.hpp"
#include "mpiaccel/state.hpp"

using namespace mpiaccel;

namespace {

ShardedStateDict make_state(int64_t tensors, int size, int rank) {
  ShardedStateDict state;
  for (int64_t i = 0; i < tensors; ++i) {
    const RowRange r = even_row_range(64, size, rank);
    state.tensors.push_back({"model/block." + std::to_string(i / 8) + ".w" + std::to_string(i % 8),
                             {64, 16}, r.begin, r.count, at::full({r.count, 16}, float(i))});
  }
  return state;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Runtime rt(&argc, &argv);
  try {
    auto world = make_mpi_world(rt, std::chrono::seconds(600));
    MPIACCEL_CHECK(argc >= 2, "usage: bench_ckpt_metadata DIR [--tensors T] [--reps R]");
    int64_t tensors = 2000;
    int reps = 3;
    for (int i = 2; i + 1 < argc; i += 2) {
      const std::string a = argv[i];
      if (a == "--tensors") tensors = std::atoll(argv[i + 1]);
      else if (a == "--reps") reps = std::atoi(argv[i + 1]);
    }
    const int size = world->size(), rank = world->rank();
    Checkpointer ckpt(world, argv[1], 1);
    const ShardedStateDict state = make_state(tensors, size, rank);
    ShardedStateDict targets = make_state(tensors, size, rank);
    const auto slowest = [&](auto&& body) {
      world->barrier();
      const auto start = std::chrono::steady_clock::now();
      body();
      at::Tensor t = at::tensor(
          {std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()}, at::kDouble);
      world->all_reduce(t, ReduceOp::Max);
      return t.item<double>();
    };
    std::vector<double> saves, loads;
    std::string path;
    for (int rep = 0; rep < reps; ++rep) {
      saves.push_back(slowest([&] { path = ckpt.save(state, rep + 1, CheckpointMeta{}); }));
      for (auto& t : targets.tensors) t.local.zero_();
      loads.push_back(slowest([&] { ckpt.load(path, targets); }));
    }
    bool same = true;
    for (size_t i = 0; i < targets.tensors.size(); ++i)
      same &= at::equal(targets.tensors[i].local, state.tensors[i].local);
    all_ok(*world, same, "bench: loaded values differ from saved ones");
    if (rank == 0)
      std::printf("ours np=%d tensors=%lld save_s=%.3f load_s=%.3f\n", size,
                  static_cast<long long>(tensors), median(saves), median(loads));
    return 0;
  } catch (const mpiaccel::Error& e) {
    std::fprintf(stderr, "bench_ckpt_metadata: %s\n", e.message().c_str());
    return 1;
  }
}
