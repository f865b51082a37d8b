// What this machine's MPI-IO and parallel HDF5 can do for the checkpoint's
// write pattern, without mpiaccel or LibTorch in the way: the ceiling that
// Checkpointer::save is measured against (docs/checkpoint.md, "Save speed").
//
// The pattern is bench_ckpt's: 8 tensors [rows, 4096] float32 (~1 GiB in all)
// plus 8 small [4096] 2-byte tensors, each sharded by dim-0 rows over the ranks,
// every tensor starting on a 1 MiB boundary (as H5Pset_alignment places them).
// Every method writes the same bytes from the same buffers and ends with the
// data on the disk (fsync / MPI_File_sync / H5Fflush), timed barrier to barrier:
//
//   seq        rank 0 alone: write() in 8 MiB pieces + fsync (bench_ckpt's peer)
//   posix      every rank pwrite()s its blocks into one shared file + fsync
//   write_at   MPI_File_write_at of each block, MPI_File_sync, close
//   write_all  MPI_File_write_at_all of each block (collective), sync, close
//   h5:<opts>  one parallel HDF5 file like a checkpoint's, opts joined by '+':
//              coll (collective transfer, two-phase) | collind (collective,
//              H5FD_MPIO_INDIVIDUAL_IO) | ind (independent transfer);
//              noalign; late (H5D_ALLOC_TIME_LATE, default EARLY);
//              nometa (no H5Pset_coll_metadata_write); noflush (close only)
//
//   mpirun -np N io_ceiling DIR [--mib N] [--reps R] [METHOD ...]
//
// Each repetition runs every method once, in a rotating order; the best and
// the worst repetition are printed, and the phases (write, flush, close) of
// the best one.

#include <fcntl.h>
#include <hdf5.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

constexpr int64_t kCols = 4096;
constexpr int kTensors = 8;
constexpr int64_t kAlign = 1 << 20;

struct Block {
  int64_t tensor_offset;  // in the file (posix/MPI methods)
  int64_t rows, row_bytes, row_begin, row_count;
  const char* data;
};

struct Phases {
  double write = 0, flush = 0, close = 0;
  double total() const { return write + flush + close; }
};

int g_rank = 0, g_size = 1;
double g_cold = 0;  // seconds to wait after deleting the previous file

constexpr int64_t kDirectAlign = 4096;
constexpr int64_t kStage = 8 << 20;

// Writes [data, data+n) at `at`: the 4 KiB-aligned middle with O_DIRECT
// through an aligned staging buffer, the edges buffered.
void write_direct(int dfd, int bfd, const char* data, int64_t n, int64_t at, char* stage) {
  const int64_t lo = (at + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
  const int64_t hi = std::max(lo, (at + n) / kDirectAlign * kDirectAlign);
  auto buffered = [&](int64_t from, int64_t to) {
    if (to > from && ::pwrite(bfd, data + (from - at), static_cast<size_t>(to - from), from) != to - from)
      throw 1;
  };
  if (hi <= lo) return buffered(at, at + n);
  buffered(at, lo);
  for (int64_t pos = lo; pos < hi; pos += kStage) {
    const int64_t len = std::min(kStage, hi - pos);
    std::memcpy(stage, data + (pos - at), static_cast<size_t>(len));
    if (::pwrite(dfd, stage, static_cast<size_t>(len), pos) != len) throw 2;
  }
  buffered(hi, at + n);
}

void fail(const std::string& what) {
  std::fprintf(stderr, "io_ceiling rank %d: %s\n", g_rank, what.c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

int64_t begin_of(int64_t rows, int rank) { return rows * rank / g_size; }

// Barrier-to-barrier time of one phase, as the slowest rank sees it.
template <typename F>
double phase(F&& body) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  body();
  MPI_Barrier(MPI_COMM_WORLD);
  return MPI_Wtime() - t0;
}

void check_mpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS) fail(std::string(what) + " failed");
}

class Ceiling {
 public:
  Ceiling(std::string dir, int64_t total_bytes) : dir_(std::move(dir)) {
    const int64_t rows = std::max<int64_t>(1, total_bytes / kTensors / (kCols * 4));
    int64_t offset = 0;
    auto add = [&](int64_t tensor_rows, int64_t row_bytes) {
      Block b;
      b.tensor_offset = offset;
      b.rows = tensor_rows;
      b.row_bytes = row_bytes;
      b.row_begin = begin_of(tensor_rows, g_rank);
      b.row_count = begin_of(tensor_rows, g_rank + 1) - b.row_begin;
      blocks_.push_back(b);
      offset += (tensor_rows * row_bytes + kAlign - 1) / kAlign * kAlign;
    };
    for (int i = 0; i < kTensors; ++i) {
      add(rows, kCols * 4);
      add(kCols, 2);
    }
    file_bytes_ = offset;
    for (const auto& b : blocks_) {
      mine_ += b.row_count * b.row_bytes;
      total_ += b.rows * b.row_bytes;
    }
    // Every rank's rows in one buffer, touched (as a model's tensors are).
    buffer_.resize(static_cast<size_t>(mine_));
    uint64_t x = 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(g_rank);
    for (size_t i = 0; i + 8 <= buffer_.size(); i += 8) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      std::memcpy(&buffer_[i], &x, 8);
    }
    int64_t at = 0;
    for (auto& b : blocks_) {
      b.data = buffer_.data() + at;
      at += b.row_count * b.row_bytes;
    }
    stage_ = static_cast<char*>(std::aligned_alloc(kDirectAlign, kStage));
    std::memset(stage_, 0, kStage);
    if (g_rank == 0) {
      seq_source_.resize(static_cast<size_t>(total_));
      std::memset(seq_source_.data(), 1, seq_source_.size());
    }
  }

  int64_t total_bytes() const { return total_; }

  Phases run(const std::string& method) {
    const std::string path = dir_ + "/ceiling.bin";
    if (g_rank == 0) ::unlink(path.c_str());
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_cold > 0) ::usleep(static_cast<useconds_t>(g_cold * 1e6));
    Phases p;
    if (method == "seq") p = seq(path);
    else if (method == "seq_direct") p = seq_direct(path);
    else if (method == "posix") p = posix(path);
    else if (method == "write_at") p = mpi(path, false);
    else if (method == "write_all") p = mpi(path, true);
    else if (method.compare(0, 3, "h5:") == 0) p = h5(path, method.substr(3));
    else fail("unknown method " + method);
    if (g_rank == 0) ::unlink(path.c_str());
    return p;
  }

 private:
  Phases seq(const std::string& path) {
    Phases p;
    int fd = -1;
    p.write = phase([&] {
      if (g_rank != 0) return;
      fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      for (int64_t done = 0; done < total_;) {
        const auto n = static_cast<size_t>(std::min<int64_t>(8 << 20, total_ - done));
        if (::write(fd, seq_source_.data() + done, n) != static_cast<ssize_t>(n)) fail("write");
        done += static_cast<int64_t>(n);
      }
    });
    p.flush = phase([&] { if (g_rank == 0) ::fsync(fd); });
    p.close = phase([&] { if (g_rank == 0) ::close(fd); });
    return p;
  }

  Phases seq_direct(const std::string& path) {
    Phases p;
    int fd = -1;
    p.write = phase([&] {
      if (g_rank != 0) return;
      fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
      if (fd < 0) fail("O_DIRECT open");
      for (int64_t done = 0; done < total_;) {
        const int64_t n = std::min<int64_t>(kStage, total_ - done);
        const int64_t whole = (n + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
        std::memcpy(stage_, seq_source_.data() + done, static_cast<size_t>(n));
        if (::pwrite(fd, stage_, static_cast<size_t>(whole), done) != whole) fail("pwrite direct");
        done += n;
      }
    });
    p.flush = phase([&] { if (g_rank == 0) ::fdatasync(fd); });
    p.close = phase([&] { if (g_rank == 0) ::close(fd); });
    return p;
  }

  Phases posix(const std::string& path) {
    Phases p;
    int fd = -1;
    p.write = phase([&] {
      fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0644);
      for (const auto& b : blocks_) {
        const int64_t n = b.row_count * b.row_bytes;
        if (n > 0 && ::pwrite(fd, b.data, static_cast<size_t>(n), b.tensor_offset + b.row_begin * b.row_bytes) != n)
          fail("pwrite");
      }
    });
    p.flush = phase([&] { ::fsync(fd); });
    p.close = phase([&] { ::close(fd); });
    return p;
  }

  Phases mpi(const std::string& path, bool collective) {
    Phases p;
    MPI_File fh;
    p.write = phase([&] {
      check_mpi(MPI_File_open(MPI_COMM_WORLD, path.c_str(), MPI_MODE_CREATE | MPI_MODE_WRONLY,
                              MPI_INFO_NULL, &fh), "MPI_File_open");
      for (const auto& b : blocks_) {
        const int64_t n = b.row_count * b.row_bytes;
        const MPI_Offset at = b.tensor_offset + b.row_begin * b.row_bytes;
        MPI_Status st;
        if (collective)
          check_mpi(MPI_File_write_at_all(fh, at, b.data, static_cast<int>(n), MPI_BYTE, &st), "write_at_all");
        else if (n > 0)
          check_mpi(MPI_File_write_at(fh, at, b.data, static_cast<int>(n), MPI_BYTE, &st), "write_at");
      }
    });
    p.flush = phase([&] { check_mpi(MPI_File_sync(fh), "MPI_File_sync"); });
    p.close = phase([&] { MPI_File_close(&fh); });
    return p;
  }

  Phases h5(const std::string& path, const std::string& opts) {
    auto has = [&](const char* o) { return ("+" + opts + "+").find(std::string("+") + o + "+") != std::string::npos; };
    Phases p;
    hid_t file = -1;
    std::vector<hid_t> dsets;
    hid_t bf16 = H5Tcopy(H5T_IEEE_F32LE);
    H5Tset_fields(bf16, 15, 7, 8, 0, 7);
    H5Tset_offset(bf16, 0);
    H5Tset_precision(bf16, 16);
    H5Tset_size(bf16, 2);
    H5Tset_ebias(bf16, 127);
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    if (has("ind")) {
      H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_INDEPENDENT);
    } else {
      H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
      if (has("collind")) H5Pset_dxpl_mpio_collective_opt(dxpl, H5FD_MPIO_INDIVIDUAL_IO);
    }
    p.write = phase([&] {
      hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
      H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL);
      if (!has("nometa")) H5Pset_coll_metadata_write(fapl, 1);
      if (!has("noalign")) H5Pset_alignment(fapl, kAlign, kAlign);
      file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
      if (file < 0) fail("H5Fcreate");
      H5Pclose(fapl);
      hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
      H5Pset_layout(dcpl, H5D_CONTIGUOUS);
      H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
      H5Pset_alloc_time(dcpl, has("late") ? H5D_ALLOC_TIME_LATE : H5D_ALLOC_TIME_EARLY);
      int i = 0;
      for (const auto& b : blocks_) {
        const bool wide = b.row_bytes > 2;
        hsize_t dims[2] = {static_cast<hsize_t>(b.rows), static_cast<hsize_t>(kCols)};
        hid_t space = H5Screate_simple(wide ? 2 : 1, dims, nullptr);
        const std::string name = "/t" + std::to_string(i++);
        dsets.push_back(H5Dcreate2(file, name.c_str(), wide ? H5T_IEEE_F32LE : bf16, space,
                                   H5P_DEFAULT, dcpl, H5P_DEFAULT));
        H5Sclose(space);
      }
      H5Pclose(dcpl);
      if (has("direct")) {
        std::vector<haddr_t> where;
        for (hid_t d : dsets) where.push_back(H5Dget_offset(d));
        for (hid_t d : dsets) H5Dclose(d);
        dsets.clear();
        if (H5Fclose(file) < 0) fail("H5Fclose");
        file = -1;
        int dfd = ::open(path.c_str(), O_WRONLY | O_DIRECT);
        int bfd = ::open(path.c_str(), O_WRONLY);
        if (dfd < 0 || bfd < 0) fail("open direct");
        for (size_t k = 0; k < blocks_.size(); ++k) {
          const auto& b = blocks_[k];
          if (b.row_count > 0)
            write_direct(dfd, bfd, b.data, b.row_count * b.row_bytes,
                         static_cast<int64_t>(where[k]) + b.row_begin * b.row_bytes, stage_);
        }
        ::fdatasync(bfd);
        ::close(dfd);
        ::close(bfd);
        return;
      }
      for (size_t k = 0; k < blocks_.size(); ++k) {
        const auto& b = blocks_[k];
        const bool wide = b.row_bytes > 2;
        hid_t fs = H5Dget_space(dsets[k]);
        hsize_t start[2] = {static_cast<hsize_t>(b.row_begin), 0};
        hsize_t count[2] = {static_cast<hsize_t>(b.row_count), static_cast<hsize_t>(kCols)};
        hid_t ms;
        static const char nothing = 0;
        const void* buf = b.data;
        if (b.row_count == 0) {
          H5Sselect_none(fs);
          ms = H5Scopy(fs);
          H5Sselect_none(ms);
          buf = &nothing;
        } else {
          H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr);
          ms = H5Screate_simple(wide ? 2 : 1, count, nullptr);
        }
        if (H5Dwrite(dsets[k], wide ? H5T_NATIVE_FLOAT : bf16, ms, fs, dxpl, buf) < 0) fail("H5Dwrite");
        if (k == 0 && g_rank == 0 && !reported_[opts]) {
          reported_[opts] = true;
          H5D_mpio_actual_io_mode_t mode;
          uint32_t local_cause = 0, global_cause = 0;
          H5Pget_mpio_actual_io_mode(dxpl, &mode);
          H5Pget_mpio_no_collective_cause(dxpl, &local_cause, &global_cause);
          std::printf("  [%s] actual io mode %d (0 none, 1 chunk ind, 2 chunk coll, 3 chunk mixed, "
                      "4 contiguous coll), no-collective cause 0x%x\n",
                      opts.c_str(), static_cast<int>(mode), global_cause);
        }
        H5Sclose(ms);
        H5Sclose(fs);
      }
    });
    p.flush = phase([&] {
      if (file < 0) return;
      if (!has("noflush") && H5Fflush(file, H5F_SCOPE_GLOBAL) < 0) fail("H5Fflush");
    });
    p.close = phase([&] {
      for (hid_t d : dsets) H5Dclose(d);
      if (file >= 0 && H5Fclose(file) < 0) fail("H5Fclose");
    });
    H5Pclose(dxpl);
    H5Tclose(bf16);
    return p;
  }

  std::string dir_;
  std::vector<Block> blocks_;
  std::vector<char> buffer_, seq_source_;
  int64_t mine_ = 0, total_ = 0, file_bytes_ = 0;
  std::map<std::string, bool> reported_;
  char* stage_ = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (argc < 2) fail("usage: io_ceiling DIR [--mib N] [--reps R] [METHOD ...]");
  const std::string dir = argv[1];
  int64_t mib = 1024;
  int reps = 3;
  std::vector<std::string> methods;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mib" && i + 1 < argc) mib = std::atoll(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--cold" && i + 1 < argc) g_cold = std::atof(argv[++i]);
    else methods.push_back(a);
  }
  if (methods.empty()) methods = {"seq", "posix", "write_at", "write_all", "h5:collind", "h5:ind", "h5:coll"};
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  Ceiling c(dir, mib << 20);
  std::map<std::string, std::vector<Phases>> times;
  for (int rep = 0; rep < reps; ++rep)
    for (size_t k = 0; k < methods.size(); ++k) {
      const auto& m = methods[(k + static_cast<size_t>(rep)) % methods.size()];
      times[m].push_back(c.run(m));
    }
  if (g_rank == 0) {
    const double gb = static_cast<double>(c.total_bytes()) / 1e9;
    for (const auto& m : methods) {
      auto& v = times[m];
      std::sort(v.begin(), v.end(), [](const Phases& a, const Phases& b) { return a.total() < b.total(); });
      std::printf("np %d  %-22s best %6.3f s %6.3f GB/s  worst %6.3f s  (best: write %.3f flush %.3f close %.3f)\n",
                  g_size, m.c_str(), v.front().total(), gb / v.front().total(), v.back().total(),
                  v.front().write, v.front().flush, v.front().close);
    }
  }
  MPI_Finalize();
  return 0;
}
