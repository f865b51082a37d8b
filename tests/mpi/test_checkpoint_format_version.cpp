// ctest: links mpiaccel; np 1 2 3; timeout 120
// Checkpoint format versions (docs/checkpoint.md, "Format versions"). Saves
// write version 2, with /meta/shard_index. A version 1 file (the same file
// without the index, as mpiaccel wrote it before the index existed) loads at
// any world size with the same values, into the saving layout, another
// layout and whole on every rank, and reads in CheckpointReader. A version 2
// file without its index is damaged; a version this build does not know is
// refused with one line that says what to do.
#define BOOST_TEST_MODULE checkpoint_format_version
#include "support/mpi_test.hpp"
#include "support/old_checkpoint.hpp"
#include "support/shared_dir.hpp"

#include <ATen/ATen.h>
#include <hdf5.h>

#include <filesystem>
#include <functional>

#include "checkpoint/hdf5/h5_attributes.hpp"
#include "mpiaccel/checkpoint.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/state.hpp"

namespace fs = std::filesystem;
using namespace mpiaccel;
using mpiaccel::test::SharedDir;
using mpiaccel::test::world;
using mpiaccel::test::world_ptr;

namespace {

struct Spec {
  const char* name;
  std::vector<int64_t> shape;
  at::Tensor full;
};

// Every rank computes the full tensors itself: the expected values need no
// communication. A 0-d tensor is one row; bf16 and int64 check the types.
std::vector<Spec> specs() {
  return {
      {"model/w", {10, 3}, at::arange(30, at::kFloat).reshape({10, 3}) * 0.25},
      {"model/b", {10}, at::arange(10, at::kLong) - 4},
      {"optim/w/exp_avg", {10, 3}, (at::arange(30, at::kFloat).reshape({10, 3}) * -0.5).to(at::kBFloat16)},
      {"optim/w/step", {}, at::full({}, 7.0, at::kFloat)},
  };
}

using Layout = std::function<RowRange(int64_t rows)>;

Layout saving_layout() { return [](int64_t rows) { return even_row_range(rows, world().size(), world().rank()); }; }
Layout reversed_layout() {
  return [](int64_t rows) { return even_row_range(rows, world().size(), world().size() - 1 - world().rank()); };
}
Layout whole_layout() { return [](int64_t rows) { return RowRange{0, rows}; }; }

at::Tensor rows_of(const Spec& s, RowRange r) {
  if (s.shape.empty()) return r.count ? s.full.clone() : at::empty({0}, s.full.options());
  return s.full.narrow(0, r.begin, r.count).clone();
}

ShardedStateDict state(const Layout& layout) {
  ShardedStateDict dict;
  for (const Spec& s : specs()) {
    const RowRange r = layout(s.shape.empty() ? 1 : s.shape[0]);
    dict.tensors.push_back({s.name, s.shape, r.begin, r.count, rows_of(s, r)});
  }
  dict.attributes = {{"optimizer", "adamw"}};
  return dict;
}

// Targets of `layout`, zeroed.
ShardedStateDict targets(const Layout& layout) {
  ShardedStateDict dict = state(layout);
  for (auto& t : dict.tensors) t.local.zero_();
  return dict;
}

// Same dtype and values (compared as double: exact for these bf16 and int64 values).
bool same(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && at::equal(a.to(at::kDouble), b.to(at::kDouble));
}

bool holds_its_rows(const ShardedStateDict& loaded) {
  bool ok = loaded.attributes.count("optimizer") == 1;
  const std::vector<Spec> all = specs();
  for (size_t i = 0; i < all.size(); ++i) {
    const ShardedTensor& t = loaded.tensors[i];
    ok = ok && same(t.local, rows_of(all[i], {t.row_begin, t.row_count}));
  }
  return ok;
}

std::string saved_checkpoint(const SharedDir& dir) {
  Checkpointer ckpt(world_ptr(), dir.path, 0);
  CheckpointMeta meta;
  meta.strategy = "fsdp";
  return ckpt.save(state(saving_layout()), 3, meta);
}

// A copy of `path` changed by `edit` (an HDF5 file opened read-write) on rank 0.
std::string edited_copy(const std::string& path, const std::string& copy,
                        const std::function<void(hid_t)>& edit) {
  if (world().rank() == 0) {
    fs::copy_file(path, copy, fs::copy_options::overwrite_existing);
    hid_t file = H5Fopen(copy.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    edit(file);
    H5Fclose(file);
  }
  world().barrier();
  return copy;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

// The same one-line message on every rank, containing every needle.
bool fails_everywhere_with(const std::string& message, std::initializer_list<const char*> needles) {
  BOOST_TEST_MESSAGE("rank " << world().rank() << ": " << message);
  bool ok = !message.empty() && message.find('\n') == std::string::npos;
  for (const char* n : needles) ok = ok && message.find(n) != std::string::npos;
  for (const auto& m : world().all_gather_bytes(message)) ok = ok && m == message;
  return ok;
}

int64_t root_format_version(const std::string& path) {
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  int64_t version = -1;
  hid_t attr = H5Aopen(file, "format_version", H5P_DEFAULT);
  H5Aread(attr, H5T_NATIVE_INT64, &version);
  H5Aclose(attr);
  H5Fclose(file);
  return version;
}

bool has_shard_index(const std::string& path) {
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const bool has = H5Lexists(file, "/meta", H5P_DEFAULT) > 0 &&
                   H5Lexists(file, "/meta/shard_index", H5P_DEFAULT) > 0;
  H5Fclose(file);
  return has;
}

}  // namespace

BOOST_AUTO_TEST_CASE(saves_write_version_2_with_the_shard_index) {
  SharedDir dir("ckpt_version");
  const std::string path = saved_checkpoint(dir);
  BOOST_TEST(kCheckpointFormatVersion == 2);
  MPIACCEL_CHECK_ALL(root_format_version(path) == 2 && has_shard_index(path));
  Checkpointer ckpt(world_ptr(), dir.path, 0);
  ShardedStateDict loaded = targets(saving_layout());
  MPIACCEL_CHECK_ALL(ckpt.load(path, loaded).format_version == 2 && holds_its_rows(loaded));
}

BOOST_AUTO_TEST_CASE(version_1_files_load_with_the_same_values) {
  SharedDir dir("ckpt_version");
  const std::string path = saved_checkpoint(dir);
  const std::string old = edited_copy(path, dir.path + "/version_1.h5", [](hid_t file) {
    BOOST_REQUIRE(test::make_format_version_1(file));
  });
  MPIACCEL_CHECK_ALL(root_format_version(old) == 1 && !has_shard_index(old));
  Checkpointer ckpt(world_ptr(), dir.path, 0);
  for (const auto& [what, layout] : {std::pair{"saving layout", saving_layout()},
                                     std::pair{"reversed layout", reversed_layout()},
                                     std::pair{"whole on every rank", whole_layout()}}) {
    BOOST_TEST_CONTEXT(what) {
      ShardedStateDict from_old = targets(layout), from_new = targets(layout);
      const CheckpointMeta meta = ckpt.load(old, from_old);
      ckpt.load(path, from_new);
      MPIACCEL_CHECK_ALL(meta.format_version == 1 && meta.step == 3 && meta.strategy == "fsdp");
      MPIACCEL_CHECK_ALL(holds_its_rows(from_old) && holds_its_rows(from_new));
    }
  }
  if (world().rank() == 0) {
    CheckpointReader reader(old);
    BOOST_TEST(reader.info().format_version == 1);
    BOOST_TEST(reader.verify().empty());
    BOOST_TEST(same(reader.read("optim/w/exp_avg"), specs()[2].full));
  }
}

BOOST_AUTO_TEST_CASE(version_2_without_the_shard_index_is_a_damaged_file) {
  SharedDir dir("ckpt_version");
  const std::string path = saved_checkpoint(dir);
  const std::string bad = edited_copy(path, dir.path + "/lost_index.h5", [](hid_t file) {
    H5Ldelete(file, "/meta/shard_index", H5P_DEFAULT);
  });
  Checkpointer ckpt(world_ptr(), dir.path, 0);
  ShardedStateDict loaded = targets(saving_layout());
  MPIACCEL_CHECK_ALL(fails_everywhere_with(
      error_of([&] { ckpt.load(bad, loaded); }),
      {"lost_index.h5", "format version 2", "/meta/shard_index", "damaged file"}));
  if (world().rank() == 0) {
    const std::string tool = error_of([&] { CheckpointReader reader(bad); });
    BOOST_TEST(tool.find("damaged file") != std::string::npos, tool);
  }
}

BOOST_AUTO_TEST_CASE(unknown_versions_are_refused_with_what_to_do) {
  SharedDir dir("ckpt_version");
  const std::string path = saved_checkpoint(dir);
  Checkpointer ckpt(world_ptr(), dir.path, 0);
  // A newer version names the mpiaccel that wrote it: the one to load it with.
  const std::string newer = edited_copy(path, dir.path + "/newer.h5", [](hid_t file) {
    test::set_format_version(file, 3);
    H5Adelete(file, "mpiaccel_version");
    mpiaccel::detail::write_string_attribute(file, "mpiaccel_version", "9.1.0");
  });
  ShardedStateDict loaded = targets(saving_layout());
  MPIACCEL_CHECK_ALL(fails_everywhere_with(
      error_of([&] { ckpt.load(newer, loaded); }),
      {"newer.h5", "format version 3", "reads versions 1 to 2", "load it with mpiaccel 9.1.0"}));
  // Without a writer's version it still says what to do.
  const std::string anonymous = edited_copy(path, dir.path + "/anonymous.h5", [](hid_t file) {
    test::set_format_version(file, 7);
    H5Adelete(file, "mpiaccel_version");
  });
  MPIACCEL_CHECK_ALL(fails_everywhere_with(error_of([&] { ckpt.load(anonymous, loaded); }),
                                           {"format version 7", "load it with a newer mpiaccel"}));
  const std::string zero = edited_copy(path, dir.path + "/zero.h5", [](hid_t file) {
    test::set_format_version(file, 0);
  });
  MPIACCEL_CHECK_ALL(fails_everywhere_with(error_of([&] { ckpt.load(zero, loaded); }),
                                           {"format version 0", "damaged file"}));
  if (world().rank() == 0) {
    const std::string tool = error_of([&] { CheckpointReader reader(newer); });
    BOOST_TEST(tool.find("load it with mpiaccel 9.1.0") != std::string::npos, tool);
  }
}
