// Loads that read each byte once (docs/checkpoint.md, "Loads that read each
// byte once"): a checkpoint of ~MIB MiB (8 float32 [rows, 4096] weights and
// their bf16 biases, 16 tensors, plus --small tensors of 64 floats), saved
// sharded at this world size, then loaded into every rank whole, as DDP
// replicas load it, twice: with today's reader (MPIACCEL_CKPT_READ_ONCE=0:
// each rank reads all it loads) and with the read-once load (each rank
// reads a 1/N slice, the ranks all-gather). The page cache is dropped
// before each load. Storage traffic is /proc/self/io's read_bytes (what the
// block layer fetched, O_DIRECT included) and rchar (what read calls
// returned), summed over the ranks.
//
//   mpirun -np N bench_ckpt_read_once DIR [--mib MIB] [--small K]

#include <ATen/ATen.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "mpiaccel/checkpoint.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/runtime.hpp"
#include "mpiaccel/state.hpp"

using namespace mpiaccel;

namespace {

constexpr int64_t kCols = 4096;

// This rank's even share of each tensor, or (whole) every tensor entire.
ShardedStateDict make_state(int64_t mib, int64_t small, int size, int rank, bool whole) {
  ShardedStateDict state;
  auto add = [&](std::string name, std::vector<int64_t> shape, at::ScalarType dtype) {
    const RowRange r = whole ? RowRange{0, shape[0]} : even_row_range(shape[0], size, rank);
    std::vector<int64_t> local_shape = shape;
    local_shape[0] = r.count;
    at::manual_seed(static_cast<uint64_t>(state.tensors.size()));
    at::Tensor full = at::rand(shape).to(dtype);
    state.tensors.push_back({std::move(name), shape, r.begin, r.count,
                             full.narrow(0, r.begin, r.count).contiguous().view(local_shape)});
  };
  const int64_t rows = std::max<int64_t>(1, (mib << 20) / 8 / (kCols * 4));
  for (int i = 0; i < 8; ++i) {
    add("model/layers." + std::to_string(i) + ".weight", {rows, kCols}, at::kFloat);
    add("model/layers." + std::to_string(i) + ".bias", {kCols}, at::kBFloat16);
  }
  for (int64_t i = 0; i < small; ++i) add("model/small." + std::to_string(i), {64}, at::kFloat);
  return state;
}

// /proc/self/io's `key`.
int64_t io_counter(const std::string& key) {
  std::ifstream io("/proc/self/io");
  std::string name;
  int64_t value = 0;
  while (io >> name >> value)
    if (name == key + ":") return value;
  return -1;
}

void drop_cache(const std::string& dir) {
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const int fd = ::open(entry.path().c_str(), O_RDONLY);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Runtime rt(&argc, &argv);
  try {
    auto world = make_mpi_world(rt, std::chrono::seconds(600));
    MPIACCEL_CHECK(argc >= 2, "usage: bench_ckpt_read_once DIR [--mib MIB] [--small K]");
    const std::string dir = argv[1];
    int64_t mib = 256, small = 0;
    for (int i = 2; i + 1 < argc; i += 2) {
      const std::string a = argv[i];
      if (a == "--mib") mib = std::atoll(argv[i + 1]);
      else if (a == "--small") small = std::atoll(argv[i + 1]);
    }
    const int size = world->size(), rank = world->rank();
    Checkpointer ckpt(world, dir, 0);
    const ShardedStateDict saved = make_state(mib, small, size, rank, false);
    const std::string path = ckpt.save(saved, 1, CheckpointMeta{});
    const ShardedStateDict expected = make_state(mib, small, size, rank, true);
    int64_t tensor_bytes = 0;
    for (const auto& t : expected.tensors) tensor_bytes += t.local.numel() * t.local.element_size();
    for (const char* mode : {"0", "1"}) {
      ::setenv("MPIACCEL_CKPT_READ_ONCE", mode, 1);
      ShardedStateDict targets = make_state(mib, small, size, rank, true);
      for (auto& t : targets.tensors) t.local.zero_();
      if (rank == 0) drop_cache(dir);
      world->barrier();
      const int64_t read0 = io_counter("read_bytes"), rchar0 = io_counter("rchar");
      const auto start = std::chrono::steady_clock::now();
      ckpt.load(path, targets);
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      at::Tensor io = at::tensor({static_cast<double>(io_counter("read_bytes") - read0),
                                  static_cast<double>(io_counter("rchar") - rchar0)}, at::kDouble);
      world->all_reduce(io, ReduceOp::Sum);
      at::Tensor slowest = at::tensor({seconds}, at::kDouble);
      world->all_reduce(slowest, ReduceOp::Max);
      seconds = slowest.item<double>();
      bool same = true;
      for (size_t i = 0; i < targets.tensors.size(); ++i)
        same &= at::equal(targets.tensors[i].local, expected.tensors[i].local);
      all_ok(*world, same, "bench: loaded values differ from saved ones");
      if (rank == 0)
        std::printf("np %d  %-26s %6.3f s  tensor bytes %8.1f MiB  storage read %8.1f MiB (%.2fx)  "
                    "read calls %8.1f MiB (%.2fx)\n",
                    size, mode[0] == '1' ? "read-once load" : "each rank reads (before)", seconds,
                    tensor_bytes / 1048576.0, io[0].item<double>() / 1048576.0,
                    io[0].item<double>() / tensor_bytes, io[1].item<double>() / 1048576.0,
                    io[1].item<double>() / tensor_bytes);
    }
    return 0;
  } catch (const mpiaccel::Error& e) {
    std::fprintf(stderr, "bench_ckpt_read_once: %s\n", e.message().c_str());
    return 1;
  }
}
