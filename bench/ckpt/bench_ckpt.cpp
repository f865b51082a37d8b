// Checkpoint benchmark: Checkpointer::save/load of ~1 GiB of sharded state
// against, on the same disk in the same run,
//   - seq:   one plain sequential write() + fsync of the same bytes by one
//            process, and the same with O_DIRECT (the disk's own limit,
//            without the page cache); each read back sequentially from its
//            own file (buffered, and with O_DIRECT);
//   - torch: torch::save of each rank's tensors to its own file (+ fsync, as
//            ours syncs) and torch::load back.
// Like with like: every method's previous output is deleted before its timed
// run (ours keeps every checkpoint, so no pruning is timed), and then the
// benchmark waits --settle seconds (default 3). On a VM that hands freed guest
// memory back to the host (free page reporting, as on this machine), pages
// freed by a deletion come back cheap for ~2 s and cost a host page fault
// each after that; without the wait, whichever method runs right after a
// deletion writes into warm pages and looks up to 5x faster
// (docs/checkpoint.md, "Save speed").
// Page-cache pages of every file are dropped (posix_fadvise DONTNEED after an
// fsync) before each read, and the same wait follows, so loads come from the
// disk into equally cold memory for every method. Every file is read once
// per repetition, by one method: a second read of a file comes from the
// host's cache of the virtual disk (measured: 2 GB/s instead of 0.7-1.6).
//
//   mpirun -np N bench_ckpt DIR [--mib TOTAL] [--reps R] [--settle S] [--csv FILE] [--load-only CKPT]
//                               [--methods seq,torch,ours[,peerread]]
//
// --load-only loads a checkpoint written by another world size (resharding)
// into this world's even row layout and times only that.

#include <ATen/ATen.h>
#include <fcntl.h>
#include <torch/serialize.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/bench_util.hpp"
#include "mpiaccel/checkpoint.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/runtime.hpp"
#include "mpiaccel/state.hpp"

using namespace mpiaccel;
using mpiaccel::bench::median;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kCols = 4096;
constexpr int kTensors = 8;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void drop_cache(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

void fsync_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  MPIACCEL_CHECK(fd >= 0, "cannot open " + path);
  ::fsync(fd);
  ::close(fd);
}

// 8 weight-like tensors [rows, 4096] float32 plus their bf16 "bias" rows,
// sharded by even_row_range: this rank's state.
ShardedStateDict make_state(int64_t total_bytes, int size, int rank, bool zeros) {
  ShardedStateDict state;
  const int64_t rows = std::max<int64_t>(1, total_bytes / kTensors / (kCols * 4));
  for (int i = 0; i < kTensors; ++i) {
    const RowRange r = even_row_range(rows, size, rank);
    at::Tensor local = zeros ? at::zeros({r.count, kCols}) : at::rand({r.count, kCols});
    state.tensors.push_back({"model/layers." + std::to_string(i) + ".weight", {rows, kCols},
                             r.begin, r.count, local});
    const RowRange b = even_row_range(kCols, size, rank);
    at::Tensor bias = zeros ? at::zeros({b.count}, at::kBFloat16) : at::rand({b.count}).to(at::kBFloat16);
    state.tensors.push_back({"model/layers." + std::to_string(i) + ".bias", {kCols}, b.begin,
                             b.count, bias});
  }
  return state;
}

int64_t state_bytes(const ShardedStateDict& state) {
  int64_t n = 0;
  for (const auto& t : state.tensors) {
    int64_t e = 1;
    for (auto d : t.global_shape) e *= d;
    n += e * static_cast<int64_t>(t.local.element_size());
  }
  return n;
}

struct Row {
  std::string method, op;
  int writers;
  int64_t bytes;
  double seconds;         // the best repetition
  double median_seconds;  // the median repetition
};

class Bench {
 public:
  Bench(std::shared_ptr<Communicator> world, std::string dir, int reps, double settle,
        std::string methods)
      : world_(std::move(world)), dir_(std::move(dir)), reps_(reps), settle_(settle),
        methods_(std::move(methods)) {}

  // --methods seq,torch,ours (default all): for timing one method's phases;
  // peerread (only when named): the peer's O_DIRECT reader on our file.
  bool wanted(const char* method) const {
    return methods_.empty() || explicitly_wanted(method);
  }
  bool explicitly_wanted(const char* method) const {
    return ("," + methods_ + ",").find(std::string(",") + method + ",") != std::string::npos;
  }

  // After a method's previous output is deleted: let freed memory go back to
  // the host, so that no method writes into pages another one just freed.
  void settle() const {
    if (settle_ > 0) std::this_thread::sleep_for(std::chrono::duration<double>(settle_));
  }

  // One timing of `body`, barrier to barrier (the slowest rank counts).
  template <typename Before, typename Body>
  double time_once(Before before, Body body) {
    before();
    world_->barrier();
    const double t0 = now();
    body();
    world_->barrier();
    return now() - t0;
  }
  template <typename Before, typename Body>
  std::vector<double> repeated(Before before, Body body) {
    std::vector<double> t;
    for (int i = 0; i < reps_; ++i) t.push_back(time_once(before, body));
    return t;
  }

  // The methods alternate within each repetition and their order rotates, so
  // a disk that slows down under sustained writes (a cloud volume's burst
  // budget), or CPU time taken by other jobs, hits each method alike. The
  // best and the median repetition of each are reported: the best is what
  // the disk can do, the median what a method gets typically. The host's
  // cache of the virtual disk sometimes returns a just-written file at twice
  // the disk's speed (docs/checkpoint.md, "Load speed"), and the best of a
  // few repetitions keeps such a lucky read where the median does not.
  void run_all(int64_t total, std::vector<Row>* rows) {
    const int size = world_->size(), rank = world_->rank();
    ShardedStateDict state = make_state(total, size, rank, false);
    ShardedStateDict targets = make_state(total, size, rank, true);
    const int64_t bytes = state_bytes(state);
    // keep_last 0 keeps all: the previous checkpoint is deleted before the
    // timing, as the peers' previous files are.
    const std::string ours_dir = dir_ + "/ours_np" + std::to_string(size);
    Checkpointer ckpt(world_, ours_dir, 0);
    // One file per sequential writer, read back by its own reader only: a
    // file read a second time comes from the host's cache of the virtual
    // disk, not from the disk (docs/checkpoint.md, "Load speed").
    const std::string seq = dir_ + "/seq.bin", seq_direct = dir_ + "/seq_direct.bin";
    const std::string mine = dir_ + "/torch_rank" + std::to_string(rank) + ".pt";
    std::vector<at::Tensor> locals;
    for (const auto& s : state.tensors) locals.push_back(s.local);
    // The peer writes bytes from memory as cold as the state's (a buffer of the
    // whole size), not one small cache-hot block written over and over: on
    // this machine that alone makes a write 2-3x faster.
    const std::vector<char> block(8 << 20);  // the I/O size of the peer
    // 4 KiB-aligned, so the O_DIRECT peer writes it without a copy.
    const size_t source_bytes = static_cast<size_t>((bytes + 4095) / 4096 * 4096);
    std::unique_ptr<char, decltype(&std::free)> payload(
        rank == 0 ? static_cast<char*>(std::aligned_alloc(4096, source_bytes)) : nullptr, &std::free);
    char* source = payload.get();
    if (rank == 0) {
      at::Tensor random = at::rand({static_cast<int64_t>(source_bytes / 4)});
      std::memcpy(source, random.data_ptr(), source_bytes);
    }
    std::string path;
    int64_t step = 0;
    enum { kSeqSave, kSeqDirect, kSeqLoad, kSeqDirectLoad, kTorchSave, kTorchLoad, kOursSave, kOursLoad,
           kPeerReadsOurs, kCount };
    std::vector<std::vector<double>> t(kCount);
    auto keep = [&](int which, double seconds) { t[which].push_back(seconds); };
    // Saves, then loads; the order of the three methods rotates each repetition.
    using Method = std::pair<const char*, std::function<void()>>;
    std::vector<Method> saves = {
        {"seq", [&] {
          keep(kSeqSave, time_once([&] { if (rank == 0) ::unlink(seq.c_str()); settle(); }, [&] {
            if (rank != 0) return;
            int fd = ::open(seq.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            for (int64_t done = 0; done < bytes;) {
              const auto n = static_cast<size_t>(std::min<int64_t>(block.size(), bytes - done));
              MPIACCEL_CHECK(::write(fd, source + done, n) == static_cast<ssize_t>(n), "write failed");
              done += static_cast<int64_t>(n);
            }
            ::fsync(fd);
            ::close(fd);
          }));
        }},
        {"seq", [&] {
          keep(kSeqDirect, time_once([&] { if (rank == 0) ::unlink(seq_direct.c_str()); settle(); }, [&] {
            if (rank != 0) return;
            int fd = ::open(seq_direct.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
            MPIACCEL_CHECK(fd >= 0, "this file system does not support O_DIRECT");
            // Whole 4 KiB blocks: the last one carries up to 4095 bytes more.
            for (int64_t done = 0; done < bytes;) {
              const auto n = static_cast<size_t>(std::min<int64_t>(block.size(), static_cast<int64_t>(source_bytes) - done));
              MPIACCEL_CHECK(::pwrite(fd, source + done, n, done) == static_cast<ssize_t>(n), "O_DIRECT write failed");
              done += static_cast<int64_t>(n);
            }
            ::fsync(fd);
            ::close(fd);
          }));
        }},
        {"torch", [&] {
          keep(kTorchSave, time_once([&] { ::unlink(mine.c_str()); settle(); }, [&] {
            torch::save(locals, mine);
            fsync_file(mine);
          }));
        }},
        {"ours", [&] {
          keep(kOursSave, time_once([&] {
            if (rank == 0 && !path.empty()) {
              ::unlink(path.c_str());
              ::unlink((ours_dir + "/latest").c_str());
            }
            settle();
          }, [&] { path = ckpt.save(state, ++step, CheckpointMeta{}); }));
        }},
    };
    std::vector<Method> loads = {
        {"seq", [&] {
          keep(kSeqLoad, time_once([&] { if (rank == 0) drop_cache(seq); settle(); }, [&] {
            if (rank != 0) return;
            int fd = ::open(seq.c_str(), O_RDONLY);
            // Into the whole-size buffer, as a load fills whole-size tensors.
            for (int64_t done = 0; done < bytes;) {
              const ssize_t n = ::read(fd, source + done, static_cast<size_t>(std::min<int64_t>(block.size(), bytes - done)));
              if (n <= 0) break;
              done += n;
            }
            ::close(fd);
          }));
        }},
        {"seq", [&] {
          // The same with O_DIRECT: no page-cache pages to allocate, the
          // reading counterpart of the O_DIRECT write (whole 4 KiB blocks).
          keep(kSeqDirectLoad, time_once([&] { if (rank == 0) drop_cache(seq_direct); settle(); }, [&] {
            if (rank != 0) return;
            int fd = ::open(seq_direct.c_str(), O_RDONLY | O_DIRECT);
            MPIACCEL_CHECK(fd >= 0, "this file system does not support O_DIRECT");
            for (int64_t done = 0; done < bytes;) {
              const auto n = static_cast<size_t>(std::min<int64_t>(block.size(), static_cast<int64_t>(source_bytes) - done));
              const ssize_t got = ::pread(fd, source + done, n, done);
              if (got <= 0) break;
              done += got;
            }
            ::close(fd);
          }));
        }},
        {"torch", [&] {
          keep(kTorchLoad, time_once([&] { drop_cache(mine); settle(); }, [&] {
            std::vector<at::Tensor> back;
            torch::load(back, mine);
          }));
        }},
        {"ours", [&] { keep(kOursLoad, time_once([&] { drop_cache(path); settle(); }, [&] { ckpt.load(path, targets); })); }},
    };
    // Diagnostic, only with --methods ...,peerread: the sequential O_DIRECT
    // reader of the peer, run on our latest checkpoint file (same bytes plus
    // HDF5's few KiB). Slow here = the file, fast = our reader.
    if (explicitly_wanted("peerread"))
      loads.push_back({"peerread", [&] {
        keep(kPeerReadsOurs, time_once([&] { if (rank == 0) drop_cache(path); settle(); }, [&] {
          if (rank != 0) return;
          int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
          MPIACCEL_CHECK(fd >= 0, "this file system does not support O_DIRECT");
          for (int64_t done = 0; done < static_cast<int64_t>(source_bytes);) {
            const auto n = static_cast<size_t>(std::min<int64_t>(block.size(), static_cast<int64_t>(source_bytes) - done));
            const ssize_t got = ::pread(fd, source + done, n, done);
            if (got <= 0) break;
            done += got;
          }
          ::close(fd);
        }));
      }});
    for (int rep = 0; rep < reps_; ++rep) {
      for (size_t k = 0; k < saves.size(); ++k) {
        const Method& m = saves[(k + rep) % saves.size()];
        if (wanted(m.first)) m.second();
      }
      for (size_t k = 0; k < loads.size(); ++k) {
        const Method& m = loads[(k + rep) % loads.size()];
        if (wanted(m.first)) m.second();
      }
    }
    if (rank == 0) {
      ::unlink(seq.c_str());
      ::unlink(seq_direct.c_str());
    }
    ::unlink(mine.c_str());
    if (wanted("ours")) {
      bool same = true;
      for (size_t i = 0; i < state.tensors.size(); ++i)
        same &= at::equal(state.tensors[i].local, targets.tensors[i].local);
      all_ok(*world_, same, "bench: loaded values differ from saved ones");
    }
    auto row = [&](const char* method, const char* op, int writers, int which) {
      if (!t[which].empty())
        rows->push_back({method, op, writers, bytes, *std::min_element(t[which].begin(), t[which].end()),
                         median(t[which])});
    };
    row("seq write+fsync", "save", 1, kSeqSave);
    row("seq O_DIRECT write+fsync", "save", 1, kSeqDirect);
    row("torch::save per rank", "save", size, kTorchSave);
    row("mpiaccel save", "save", size, kOursSave);
    row("seq read", "load", 1, kSeqLoad);
    row("seq O_DIRECT read", "load", 1, kSeqDirectLoad);
    row("torch::load per rank", "load", size, kTorchLoad);
    row("mpiaccel load", "load", size, kOursLoad);
    row("seq O_DIRECT read of ours' file", "load", 1, kPeerReadsOurs);
  }

  void run_load_only(int64_t total, const std::string& path, std::vector<Row>* rows) {
    const int size = world_->size(), rank = world_->rank();
    Checkpointer ckpt(world_, dir_, 0);
    ShardedStateDict targets = make_state(total, size, rank, true);
    const int64_t bytes = state_bytes(targets);
    CheckpointMeta meta;
    const auto t = repeated([&] { drop_cache(path); settle(); }, [&] { meta = ckpt.load(path, targets); });
    rows->push_back({"mpiaccel load (saved by " + std::to_string(meta.world_size) + ")", "reshard",
                     size, bytes, *std::min_element(t.begin(), t.end()), median(t)});
  }

 private:
  std::shared_ptr<Communicator> world_;
  std::string dir_;
  int reps_;
  double settle_;
  std::string methods_;
};

}  // namespace

int main(int argc, char** argv) {
  Runtime rt(&argc, &argv);
  try {
    auto world = make_mpi_world(rt, std::chrono::seconds(600));
    MPIACCEL_CHECK(argc >= 2, "usage: bench_ckpt DIR [--mib N] [--reps R] [--settle S] [--csv FILE] [--load-only CKPT]");
    const std::string dir = argv[1];
    int64_t mib = 1024;
    // Four methods per phase rotate, so with four repetitions each one runs
    // first once (the first read after the saves finds a cold host cache).
    int reps = 4;
    double settle = 3;
    std::string csv, load_only, methods;
    for (int i = 2; i + 1 < argc; i += 2) {
      const std::string a = argv[i];
      if (a == "--mib") mib = std::atoll(argv[i + 1]);
      else if (a == "--reps") reps = std::atoi(argv[i + 1]);
      else if (a == "--settle") settle = std::atof(argv[i + 1]);
      else if (a == "--csv") csv = argv[i + 1];
      else if (a == "--load-only") load_only = argv[i + 1];
      else if (a == "--methods") methods = argv[i + 1];
    }
    if (rt.is_main_process()) fs::create_directories(dir);
    world->barrier();
    Bench bench(world, dir, reps, settle, methods);
    std::vector<Row> rows;
    if (load_only.empty())
      bench.run_all(mib << 20, &rows);
    else
      bench.run_load_only(mib << 20, load_only, &rows);
    if (rt.is_main_process()) {
      // The faster of the two sequential writes is the limit a save is held
      // to, the faster of the two sequential reads a load's (a resharded load
      // too: same bytes); for the best and for the median repetition alike.
      double seq_save = 0, seq_load = 0, seq_save_median = 0, seq_load_median = 0;
      const auto faster = [](double current, double candidate) {
        return current > 0 ? std::min(current, candidate) : candidate;
      };
      for (const auto& r : rows) {
        if (r.method.compare(0, 4, "seq ") != 0) continue;
        if (r.op == "save") {
          seq_save = faster(seq_save, r.seconds);
          seq_save_median = faster(seq_save_median, r.median_seconds);
        } else if (r.op == "load") {
          seq_load = faster(seq_load, r.seconds);
          seq_load_median = faster(seq_load_median, r.median_seconds);
        }
      }
      FILE* out = csv.empty() ? nullptr : std::fopen(csv.c_str(), "a");
      std::printf("best and median of %d repetitions; ratio = best seq / this, for each statistic\n", reps);
      for (const auto& r : rows) {
        const double gbps = static_cast<double>(r.bytes) / r.seconds / 1e9;
        const double median_gbps = static_cast<double>(r.bytes) / r.median_seconds / 1e9;
        const bool save = r.op == "save";
        const double peer = save ? seq_save : seq_load;
        const double peer_median = save ? seq_save_median : seq_load_median;
        char ratio[48] = "";
        if (peer > 0)
          std::snprintf(ratio, sizeof ratio, "%.2fx / %.2fx best seq", peer / r.seconds,
                        peer_median / r.median_seconds);
        std::printf("np %d  %-34s %-7s %7.1f MiB  best %6.3f s %6.3f GB/s  median %6.3f s %6.3f GB/s  %s\n",
                    world->size(), r.method.c_str(), r.op.c_str(), r.bytes / 1048576.0, r.seconds, gbps,
                    r.median_seconds, median_gbps, ratio);
        if (out)
          std::fprintf(out, "%d,%s,%s,%d,%lld,%.6f,%.4f,%.6f,%.4f\n", world->size(), r.method.c_str(),
                       r.op.c_str(), r.writers, static_cast<long long>(r.bytes), r.seconds, gbps,
                       r.median_seconds, median_gbps);
      }
      if (out) std::fclose(out);
    }
    return 0;
  } catch (const mpiaccel::Error& e) {
    std::fprintf(stderr, "bench_ckpt: %s\n", e.message().c_str());
    return 1;
  }
}
