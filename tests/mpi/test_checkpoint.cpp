// ctest: links mpiaccel; np 1 2 3 4; timeout 180
// Checkpointer round trips: every dtype bit-exact, saved with one row layout
// and loaded with others (full rows on every rank, torch.chunk layout,
// reversed parts, a different part count), tensors with fewer rows than ranks,
// 0-d and 0-row tensors, the metadata (config text over 64 KiB, trainer
// values, attributes, per-rank RNG blobs), and the commit protocol (latest,
// keep_last pruning, no temporary files left).
#define BOOST_TEST_MODULE checkpoint
#include "support/mpi_test.hpp"

#include <ATen/ATen.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>

#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>

#include "mpiaccel/checkpoint.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/state.hpp"
#include "support/checkpoint_setup.hpp"

namespace fs = std::filesystem;
using namespace mpiaccel;
using namespace mpiaccel::test;

namespace {

struct Spec {
  std::string name;
  std::vector<int64_t> shape;
  at::ScalarType dtype;
};

std::vector<Spec> specs() {
  return {
      {"model/embed.weight", {13, 5}, at::kFloat},
      {"model/layers.0.weight", {9, 3}, at::kBFloat16},
      {"model/layers.0.bias", {4}, at::kHalf},
      {"model/head.weight", {3, 2, 2}, at::kDouble},
      {"model/counter", {10}, at::kLong},
      {"model/ids", {5, 2}, at::kInt},
      {"model/mask", {8}, at::kBool},
      {"model/bytes", {6}, at::kByte},
      {"model/small", {7}, at::kChar},
      {"model/shorts", {3}, at::kShort},
      {"model/scale", {}, at::kFloat},          // 0-d: one row
      {"model/one_row", {1, 4}, at::kFloat},    // fewer rows than ranks
      {"model/empty", {0, 3}, at::kFloat},      // no rows at all
      {"optim/embed.weight/exp_avg", {13, 5}, at::kFloat},
      {"optim/embed.weight/step", {}, at::kLong},
  };
}

// The full tensor: deterministic raw bits from (tensor index, byte index), so
// every rank computes the expected values itself and round trips compare bits
// (NaN payloads included).
at::Tensor full_tensor(size_t index, const Spec& spec) {
  at::Tensor t = at::empty(spec.shape, at::TensorOptions().dtype(spec.dtype));
  auto* bytes = static_cast<unsigned char*>(t.data_ptr());
  const size_t n = static_cast<size_t>(t.numel()) * t.element_size();
  uint64_t state = 0x9E3779B97F4A7C15ull * (index + 1);
  for (size_t i = 0; i < n; ++i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    bytes[i] = static_cast<unsigned char>(state);
  }
  if (spec.dtype == at::kBool) t = t.to(at::kByte).remainder(2).to(at::kBool);
  return t;
}

ShardedStateDict make_state(const std::vector<Spec>& list, const RowLayout& layout) {
  ShardedStateDict state;
  for (size_t i = 0; i < list.size(); ++i)
    state.tensors.push_back(shard_of(list[i].name, full_tensor(i, list[i]), layout));
  state.attributes = {{"optimizer", "adamw"}, {"optimizer.group0.lr", "0.001"}};
  return state;
}

ShardedStateDict make_targets(const std::vector<Spec>& list, const RowLayout& layout) {
  ShardedStateDict targets;
  for (const auto& s : list) targets.tensors.push_back(target_of(s.name, s.shape, s.dtype, layout));
  return targets;
}

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.numel() != b.numel()) return false;
  if (a.numel() == 0) return true;  // no data pointer to compare (UBSan: memcmp of null)
  return std::memcmp(a.data_ptr(), b.data_ptr(), a.numel() * a.element_size()) == 0;
}

// Every target holds exactly its rows of the full tensors.
std::string check_targets(const std::vector<Spec>& list, const ShardedStateDict& targets) {
  for (size_t i = 0; i < list.size(); ++i) {
    const auto& t = targets.tensors[i];
    at::Tensor want = rows_of(full_tensor(i, list[i]), {t.row_begin, t.row_count});
    if (!same_bits(t.local.contiguous(), want)) return "tensor " + t.name + " differs";
  }
  return "";
}

CheckpointMeta make_meta(int64_t step) {
  CheckpointMeta meta = meta_at(step);
  meta.config_text = "[train]\nmax_steps = 10\n; " + std::string(70000, 'x') + "\n";
  meta.trainer = {{"epoch", "3"}, {"samples_seen", "1234"}, {"scheduler", std::string(40000, 's')}};
  // Different sizes per rank, one rank without any.
  const int rank = world().rank();
  meta.rng_state = rank == 1 ? "" : std::string(static_cast<size_t>(16 + 7 * rank), char('a' + rank));
  return meta;
}

}  // namespace

BOOST_AUTO_TEST_CASE(round_trip_same_layout_is_bit_exact_with_meta) {
  CheckpointDir dir("ckpt");
  const auto list = specs();
  const CheckpointMeta meta = make_meta(7);
  const std::string path = dir.ckpt.save(make_state(list, even_here), 7, meta);
  MPIACCEL_CHECK_ALL(path == dir.path + "/step_00000007.h5");
  MPIACCEL_CHECK_ALL(fs::exists(path));

  ShardedStateDict targets = make_targets(list, even_here);
  const CheckpointMeta got = dir.ckpt.load(dir.path, targets);
  const std::string diff = check_targets(list, targets);
  BOOST_TEST_MESSAGE(diff);
  MPIACCEL_CHECK_ALL(diff.empty());
  MPIACCEL_CHECK_ALL(got.step == 7);
  MPIACCEL_CHECK_ALL(got.world_size == world().size());
  MPIACCEL_CHECK_ALL(got.strategy == "ddp");
  MPIACCEL_CHECK_ALL(got.config_text == meta.config_text);
  MPIACCEL_CHECK_ALL(got.trainer == meta.trainer);
  MPIACCEL_CHECK_ALL(got.rng_state == meta.rng_state);
  MPIACCEL_CHECK_ALL(got.format_version == kCheckpointFormatVersion);
  MPIACCEL_CHECK_ALL(got.path == path);
  MPIACCEL_CHECK_ALL(targets.attributes.at("optimizer.group0.lr") == "0.001");
}

BOOST_AUTO_TEST_CASE(load_with_other_layouts_reshards) {
  CheckpointDir dir("ckpt");
  const auto list = specs();
  dir.ckpt.save(make_state(list, even_here), 1, make_meta(1));
  const int n = world().size(), r = world().rank();
  const std::vector<std::pair<std::string, RowLayout>> layouts = {
      {"full rows on every rank", [](int64_t rows) { return RowRange{0, rows}; }},
      {"torch.chunk", [&](int64_t rows) { return chunk_row_range(rows, n, r); }},
      {"reversed parts", [&](int64_t rows) { return even_row_range(rows, n, n - 1 - r); }},
      {"n+1 parts", [&](int64_t rows) { return even_row_range(rows, n + 1, r + 1); }},
      {"one row each", [&](int64_t rows) { return rows > r ? RowRange{r, 1} : RowRange{0, 0}; }},
  };
  for (const auto& [what, layout] : layouts) {
    BOOST_TEST_CONTEXT(what) {
      ShardedStateDict targets = make_targets(list, layout);
      dir.ckpt.load(dir.path, targets);
      const std::string diff = check_targets(list, targets);
      BOOST_TEST_MESSAGE(what << ": " << diff);
      MPIACCEL_CHECK_ALL(diff.empty());
    }
  }
}

BOOST_AUTO_TEST_CASE(save_with_uneven_layout_and_load_as_dtype_conversion) {
  // Saved with torch.chunk rows (the tail rank may have none), loaded into
  // float32 targets from a bfloat16 tensor (floating dtypes convert).
  CheckpointDir dir("ckpt");
  const int n = world().size(), r = world().rank();
  std::vector<Spec> list = {{"model/w", {5, 4}, at::kBFloat16}, {"model/v", {2}, at::kFloat}};
  dir.ckpt.save(make_state(list, [&](int64_t rows) { return chunk_row_range(rows, n, r); }), 3,
                make_meta(3));
  ShardedStateDict targets;
  targets.tensors.push_back({"model/w", {5, 4}, 0, 5, at::zeros({5, 4}, at::kFloat)});
  dir.ckpt.load(dir.path, targets);
  at::Tensor want = full_tensor(0, list[0]).to(at::kFloat);
  MPIACCEL_CHECK_ALL(same_bits(targets.tensors[0].local, want));
}

BOOST_AUTO_TEST_CASE(latest_and_keep_last_pruning) {
  CheckpointDir dir("ckpt", 2, "/nested/run");
  const std::vector<Spec> list = {{"model/w", {6, 2}, at::kFloat}};
  for (int64_t step : {10, 20, 30, 40}) dir.ckpt.save(make_state(list, even_here), step, make_meta(step));
  const std::string& run = dir.path;
  const auto kept = Checkpointer::list(run);
  MPIACCEL_CHECK_ALL(kept.size() == 2);
  MPIACCEL_CHECK_ALL(kept.size() == 2 && kept[0] == run + "/step_00000030.h5" &&
                     kept[1] == run + "/step_00000040.h5");
  MPIACCEL_CHECK_ALL(Checkpointer::resolve(run) == run + "/step_00000040.h5");
  std::ifstream latest(run + "/latest");
  std::string line;
  std::getline(latest, line);
  MPIACCEL_CHECK_ALL(line == "step_00000040.h5");
  bool leftovers = false;
  for (const auto& e : fs::directory_iterator(run))
    leftovers |= e.path().filename().string().find(".tmp") != std::string::npos;
  MPIACCEL_CHECK_ALL(!leftovers);
  // A file path resolves to itself; loading an explicit older file works.
  ShardedStateDict targets = make_targets(list, even_here);
  const CheckpointMeta got = dir.ckpt.load(run + "/step_00000030.h5", targets);
  MPIACCEL_CHECK_ALL(got.step == 30);
}

BOOST_AUTO_TEST_CASE(failed_save_leaves_previous_checkpoint_untouched) {
  CheckpointDir dir("ckpt", 1);
  const std::vector<Spec> list = {{"model/w", {6, 2}, at::kFloat}};
  dir.ckpt.save(make_state(list, even_here), 1, make_meta(1));
  const std::string committed = dir.path + "/step_00000001.h5";
  const auto size_before = fs::file_size(committed);

  // (a) Rows nobody holds: rank 0 finds the hole before the file exists.
  auto holes = make_state(list, even_here);
  if (world().rank() == world().size() - 1) {
    holes.tensors[0].row_count = 0;
    holes.tensors[0].local = holes.tensors[0].local.narrow(0, 0, 0);
  }
  std::string message = error_of([&] { dir.ckpt.save(holes, 2, make_meta(2)); });
  BOOST_TEST_MESSAGE("hole: " << message);
  MPIACCEL_CHECK_ALL(message.find("model/w") != std::string::npos &&
                     message.find("held by no rank") != std::string::npos);

  // (b) A different tensor list on one rank (needs a second rank to differ from).
  if (world().size() > 1) {
    auto other = make_state(list, even_here);
    if (world().rank() == world().size() - 1) other.tensors[0].name = "model/other";
    message = error_of([&] { dir.ckpt.save(other, 2, make_meta(2)); });
    MPIACCEL_CHECK_ALL(message.find("different tensor lists") != std::string::npos);
  }

  // (c) A failure inside the collective HDF5 section, after the .tmp file
  // exists: an attribute too long for HDF5 object headers.
  auto big = make_state(list, even_here);
  big.attributes["huge"] = std::string(100000, 'h');
  message = error_of([&] { dir.ckpt.save(big, 3, make_meta(3)); });
  BOOST_TEST_MESSAGE("in-file failure: " << message);
  // Every rank saw the same error.
  const bool same = same_on_every_rank(message);
  MPIACCEL_CHECK_ALL(same && message.find("huge") != std::string::npos);

  MPIACCEL_CHECK_ALL(Checkpointer::resolve(dir.path) == committed);
  MPIACCEL_CHECK_ALL(fs::file_size(committed) == size_before);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) {
    ++files;
    BOOST_TEST_MESSAGE("left: " << e.path());
  }
  MPIACCEL_CHECK_ALL(files == 2);  // step_00000001.h5 and latest
  ShardedStateDict targets = make_targets(list, even_here);
  dir.ckpt.load(dir.path, targets);
  MPIACCEL_CHECK_ALL(check_targets(list, targets).empty());
}

namespace {

// What another tool (h5repack, h5py) may do to a checkpoint: every tensor
// dataset with elements rewritten chunked, same type, bytes and attribute.
// Such datasets have no contiguous address (H5Dget_offset fails), so a load
// reads them through HDF5. Returns the names rewritten.
std::string rewrite_chunked(const std::string& file_path, const std::vector<Spec>& list) {
  std::string names;
  hid_t file = H5Fopen(file_path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  BOOST_REQUIRE(file >= 0);
  for (const auto& spec : list) {
    const std::string name = "/" + spec.name, staged = name + ".chunked";
    hid_t dset = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
    hid_t type = H5Dget_type(dset), space = H5Dget_space(dset);
    const int rank = H5Sget_simple_extent_ndims(space);
    const hssize_t points = H5Sget_simple_extent_npoints(space);
    if (rank < 1 || points == 0) {  // 0-d and empty datasets cannot be chunked
      H5Sclose(space), H5Tclose(type), H5Dclose(dset);
      continue;
    }
    std::vector<hsize_t> dims(static_cast<size_t>(rank));
    H5Sget_simple_extent_dims(space, dims.data(), nullptr);
    std::vector<char> bytes(static_cast<size_t>(points) * H5Tget_size(type));
    BOOST_REQUIRE(H5Dread(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()) >= 0);
    hid_t attr = H5Aopen(dset, "torch_dtype", H5P_DEFAULT);
    hid_t attr_type = H5Aget_type(attr), attr_space = H5Aget_space(attr);
    std::vector<char> attr_bytes(H5Tget_size(attr_type) * 4 + 64);
    BOOST_REQUIRE(H5Aread(attr, attr_type, attr_bytes.data()) >= 0);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    std::vector<hsize_t> chunk = dims;
    chunk[0] = std::max<hsize_t>(1, (dims[0] + 1) / 2);
    H5Pset_chunk(dcpl, rank, chunk.data());
    hid_t copy = H5Dcreate2(file, staged.c_str(), type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    BOOST_REQUIRE(copy >= 0);
    BOOST_REQUIRE(H5Dwrite(copy, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()) >= 0);
    hid_t copy_attr = H5Acreate2(copy, "torch_dtype", attr_type, attr_space, H5P_DEFAULT, H5P_DEFAULT);
    BOOST_REQUIRE(H5Awrite(copy_attr, attr_type, attr_bytes.data()) >= 0);
    H5Aclose(copy_attr), H5Dclose(copy), H5Pclose(dcpl);
    H5Sclose(attr_space), H5Tclose(attr_type), H5Aclose(attr);
    H5Sclose(space), H5Tclose(type), H5Dclose(dset);
    BOOST_REQUIRE(H5Ldelete(file, name.c_str(), H5P_DEFAULT) >= 0);
    BOOST_REQUIRE(H5Lmove(file, staged.c_str(), file, name.c_str(), H5P_DEFAULT, H5P_DEFAULT) >= 0);
    names += spec.name + " ";
  }
  H5Fclose(file);
  return names;
}

}  // namespace

// The load's read paths give the same bits: raw reads with O_DIRECT (the
// default above), raw reads through the page cache (MPIACCEL_CKPT_DIRECT_IO=0),
// and HDF5 hyperslab reads for a file whose datasets have no contiguous
// address (rewritten chunked, as h5repack or h5py may leave it), in the
// saved layout and in one that cuts through saved shards. Saving with the
// opt-out gives a file that loads the same.
BOOST_AUTO_TEST_CASE(read_paths_agree_raw_direct_buffered_and_hdf5) {
  CheckpointDir dir("ckpt");
  const auto list = specs();
  const std::string path = dir.ckpt.save(make_state(list, even_here), 5, make_meta(5));
  const std::string packed = dir.path + "/packed.h5";
  std::string done;
  if (world().rank() == 0) {
    fs::copy_file(path, packed);
    done = rewrite_chunked(packed, list);
  }
  done = world().broadcast_bytes(done, 0);
  BOOST_TEST_MESSAGE("rewritten chunked: " << done);
  MPIACCEL_REQUIRE_ALL(done.find("model/embed.weight") != std::string::npos);
  const int n = world().size(), r = world().rank();
  const std::vector<std::pair<std::string, RowLayout>> layouts = {
      {"saved layout", even_here},
      {"n+1 parts", [&](int64_t rows) { return even_row_range(rows, n + 1, r + 1); }},
  };
  auto load_and_check = [&](const std::string& what, const std::string& file) {
    for (const auto& [name, layout] : layouts) {
      BOOST_TEST_CONTEXT(what << ", " << name) {
        ShardedStateDict targets = make_targets(list, layout);
        dir.ckpt.load(file, targets);
        const std::string diff = check_targets(list, targets);
        BOOST_TEST_MESSAGE(what << ", " << name << ": " << diff);
        MPIACCEL_CHECK_ALL(diff.empty());
      }
    }
  };
  load_and_check("HDF5 hyperslabs (repacked)", packed);
  ::setenv("MPIACCEL_CKPT_DIRECT_IO", "0", 1);
  load_and_check("raw, page cache", path);
  const std::string buffered = dir.ckpt.save(make_state(list, even_here), 6, make_meta(6));
  ::unsetenv("MPIACCEL_CKPT_DIRECT_IO");
  load_and_check("saved through the page cache, raw O_DIRECT", buffered);
}

namespace {

// What read calls of this process have returned so far (/proc/self/io rchar).
int64_t bytes_read_by_calls() {
  std::ifstream io("/proc/self/io");
  std::string key;
  int64_t value = 0;
  while (io >> key >> value)
    if (key == "rchar:") return value;
  return -1;
}

// Sum over the ranks of the bytes their read calls returned during `load`.
int64_t bytes_read_by_all(const std::function<void()>& load) {
  world().barrier();
  const int64_t before = bytes_read_by_calls();
  load();
  return world().all_reduce_int(bytes_read_by_calls() - before);
}

}  // namespace

BOOST_AUTO_TEST_CASE(replicated_targets_read_each_byte_once) {
  // Two 4 MiB tensors and the mixed list, loaded whole on every rank (as DDP
  // replicas load): each byte is read once in all, give or take the manifest
  // and O_DIRECT's 4 KiB block edges; without it (MPIACCEL_CKPT_READ_ONCE=0)
  // every rank reads everything.
  CheckpointDir dir("ckpt");
  auto list = specs();
  list.push_back({"model/big.0", {4096, 256}, at::kFloat});
  list.push_back({"model/big.1", {1024, 1024}, at::kFloat});
  dir.ckpt.save(make_state(list, even_here), 1, make_meta(1));
  const auto whole = [](int64_t rows) { return RowRange{0, rows}; };
  const int64_t tensor_bytes = int64_t{8} << 20;  // the two big ones; the rest are < 2 KiB
  const int n = world().size();
  for (const char* mode : {"1", "0"}) {
    BOOST_TEST_CONTEXT("MPIACCEL_CKPT_READ_ONCE=" << mode) {
      ::setenv("MPIACCEL_CKPT_READ_ONCE", mode, 1);
      ShardedStateDict targets = make_targets(list, whole);
      const int64_t read = bytes_read_by_all([&] { dir.ckpt.load(dir.path, targets); });
      MPIACCEL_CHECK_ALL(check_targets(list, targets).empty());
      BOOST_TEST_MESSAGE("np " << n << " mode " << mode << ": " << read << " bytes read for "
                               << tensor_bytes);
      const int64_t expected = mode[0] == '1' ? tensor_bytes : n * tensor_bytes;
      MPIACCEL_CHECK_ALL(read >= expected && read < expected + (int64_t{1} << 20) * n);
    }
  }
  ::unsetenv("MPIACCEL_CKPT_READ_ONCE");
}
