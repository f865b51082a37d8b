// A small MPI program around Checkpointer for the process-level checkpoint
// tests (tests/scripts/test_ckpt_*.sh): saves deterministic state, loads it
// back at any world size and layout and checks every value.
//
//   ckpt_driver save DIR STEP [STEP...] [--mib N] [--keep K] [--fill-free-minus BYTES]
//   ckpt_driver load PATH --expect-step S [--layout even|full|chunk] [--mib N]
//
// State: tensor model/w (float32 [rows, 256]) of about N MiB (default 4),
// model/b (bfloat16 [rows]), model/s (0-d int64 = step), optim/w/exp_avg like
// model/w. Element i of a tensor is value(step, i) below; the Python checks
// (tests/python/) compute the same formula.
//
// Fault hook for test_ckpt_kill.sh (here, not in the library): with
// CKPT_DRIVER_KILL_RANK=R and CKPT_DRIVER_KILL_STEP=S, rank R starts a watcher
// thread before saving step S that SIGKILLs the process as soon as the
// step's temporary file exists and has grown past 1 MiB: a death in the
// middle of the collective write.
//
// --fill-free-minus B sizes model/w so the tensors total (free space - B)
// bytes (for the full-disk test): B < 0 cannot fit at all, a small B > 0 fits
// the data but not the file's metadata.

#include <ATen/ATen.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "mpiaccel/checkpoint.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/runtime.hpp"
#include "mpiaccel/state.hpp"

using namespace mpiaccel;

namespace {

constexpr int64_t kCols = 256;

// Exactly representable in float32: multiples of 1/256 below 256, plus step.
at::Tensor values(int64_t step, int64_t first, int64_t count) {
  at::Tensor idx = at::arange(first, first + count, at::kLong);
  return ((idx * static_cast<int64_t>(2654435761LL)).remainder(65536)).to(at::kFloat) / 256.0 + static_cast<double>(step);
}

struct Layout {
  std::string kind = "even";
  RowRange rows(int64_t total, int size, int rank) const {
    if (kind == "full") return {0, total};
    if (kind == "chunk") return chunk_row_range(total, size, rank);
    return even_row_range(total, size, rank);
  }
};

struct Shapes {
  int64_t w_rows = 16;
  int64_t b_rows = 37;
};

Shapes shapes_for_bytes(int64_t total_bytes) {
  Shapes s;
  // w and exp_avg: 2 * rows * kCols * 4 bytes; b: 37 * 2; s: 8.
  s.w_rows = std::max<int64_t>(1, (total_bytes - 37 * 2 - 8) / (2 * kCols * 4));
  return s;
}

// This rank's rows of every tensor (save) or targets for them (load).
ShardedStateDict make_state(int64_t step, const Shapes& sh, const Layout& layout, int size, int rank,
                            bool targets) {
  ShardedStateDict state;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, at::ScalarType dtype) {
    const int64_t rows = shape.empty() ? 1 : shape[0];
    const int64_t row_elems = shape.size() > 1 ? shape[1] : 1;
    const RowRange r = layout.rows(rows, size, rank);
    at::Tensor local;
    if (targets) {
      local = at::zeros({r.count * row_elems}, at::TensorOptions().dtype(dtype));
    } else {
      local = values(step, r.begin * row_elems, r.count * row_elems).to(dtype);
    }
    if (shape.empty())
      local = r.count ? local.reshape({}) : local;
    else {
      std::vector<int64_t> local_shape = shape;
      local_shape[0] = r.count;
      local = local.reshape(local_shape);
    }
    state.tensors.push_back({name, shape, r.begin, r.count, local});
  };
  add("model/w", {sh.w_rows, kCols}, at::kFloat);
  add("model/b", {sh.b_rows}, at::kBFloat16);
  add("model/s", {}, at::kLong);
  add("optim/w/exp_avg", {sh.w_rows, kCols}, at::kFloat);
  state.attributes["optimizer"] = "adamw";
  state.attributes["optimizer.group0.lr"] = "0.001";
  return state;
}

std::string check_loaded(const ShardedStateDict& loaded, int64_t step) {
  for (const auto& t : loaded.tensors) {
    const int64_t row_elems = t.global_shape.size() > 1 ? t.global_shape[1] : 1;
    at::Tensor want = values(step, t.row_begin * row_elems, t.row_count * row_elems)
                          .to(t.local.scalar_type());
    if (!at::equal(t.local.reshape({-1}), want)) return "tensor " + t.name + " has wrong values";
  }
  return "";
}

void start_kill_watcher(const std::string& dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "/.step_%08lld.h5.tmp", static_cast<long long>(step));
  const std::string tmp = dir + name;
  std::thread([tmp] {
    for (;;) {
      struct stat st {};
      if (::stat(tmp.c_str(), &st) == 0 && st.st_size > (1 << 20)) {
        std::fprintf(stderr, "ckpt_driver: killing myself (SIGKILL) during the save of %s\n",
                     tmp.c_str());
        ::kill(::getpid(), SIGKILL);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }).detach();
}

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : fallback;
}

int run(int argc, char** argv, Runtime& rt) {
  auto world = make_mpi_world(rt, std::chrono::seconds(60));
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() < 2) throw std::runtime_error("usage: ckpt_driver save|load PATH ...");
  const std::string mode = args[0], path = args[1];
  std::vector<int64_t> steps;
  int64_t mib = 4, keep = 0, expect = -1;
  bool fill = false;
  int64_t fill_minus = 0;
  Layout layout;
  for (size_t i = 2; i < args.size(); ++i) {
    if (args[i] == "--mib") mib = std::stoll(args[++i]);
    else if (args[i] == "--keep") keep = std::stoll(args[++i]);
    else if (args[i] == "--expect-step") expect = std::stoll(args[++i]);
    else if (args[i] == "--layout") layout.kind = args[++i];
    else if (args[i] == "--fill-free-minus") fill = true, fill_minus = std::stoll(args[++i]);
    else steps.push_back(std::stoll(args[i]));
  }
  Shapes shapes = shapes_for_bytes(mib << 20);
  Checkpointer ckpt(world, mode == "save" ? path : std::string("."), keep);
  const int rank = world->rank(), size = world->size();
  if (mode == "save") {
    const int64_t kill_rank = env_int("CKPT_DRIVER_KILL_RANK", -1);
    const int64_t kill_step = env_int("CKPT_DRIVER_KILL_STEP", -1);
    for (int64_t step : steps) {
      if (fill) {
        struct statvfs vfs {};
        int64_t free_bytes = 0;
        if (rank == 0 && ::statvfs(path.c_str(), &vfs) == 0)
          free_bytes = static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
        free_bytes = std::stoll(world->broadcast_bytes(std::to_string(free_bytes), 0));
        shapes = shapes_for_bytes(free_bytes - fill_minus);
      }
      if (rank == kill_rank && step == kill_step) start_kill_watcher(path, step);
      CheckpointMeta meta;
      meta.strategy = "ddp";
      meta.config_text = "[train]\nmax_steps = 100\n[checkpoint]\ndir = " + path + "\n";
      meta.trainer = {{"epoch", "1"}, {"samples_seen", std::to_string(step * 64)}};
      meta.rng_state = "rng-of-rank-" + std::to_string(rank);
      const std::string saved =
          ckpt.save(make_state(step, shapes, layout, size, rank, false), step, meta);
      if (rank == 0) std::printf("saved %s\n", saved.c_str());
    }
    return 0;
  }
  if (mode == "load") {
    ShardedStateDict targets = make_state(0, shapes, layout, size, rank, true);
    const CheckpointMeta meta = ckpt.load(path, targets);
    std::string problem = check_loaded(targets, meta.step);
    if (problem.empty() && expect >= 0 && meta.step != expect)
      problem = "loaded step " + std::to_string(meta.step) + ", expected " + std::to_string(expect);
    if (problem.empty() && meta.world_size == size &&
        meta.rng_state != "rng-of-rank-" + std::to_string(rank))
      problem = "rng state not restored";
    all_ok(*world, problem.empty(), problem);
    if (rank == 0)
      std::printf("loaded step %lld (saved by %d ranks) on %d ranks, layout %s: ok\n",
                  static_cast<long long>(meta.step), meta.world_size, size, layout.kind.c_str());
    return 0;
  }
  throw std::runtime_error("unknown mode " + mode);
}

}  // namespace

int main(int argc, char** argv) {
  Runtime rt(&argc, &argv);
  try {
    return run(argc, argv, rt);
  } catch (const mpiaccel::Error& e) {
    std::fprintf(stderr, "ckpt_driver: %s\n", e.message().c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ckpt_driver: rank %d: %s\n", rt.rank(), e.what());
    return 1;
  }
}
