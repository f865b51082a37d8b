// ctest: links mpiaccel; np 1 2 3 4; timeout 120
// The device mesh on every shape the world size allows (1-, 2- and 3-D): each
// rank's coordinates are its world rank in row-major order, and the group of
// any set of dimensions holds exactly the ranks that differ only there,
// ordered by their coordinates (checked by an all-gather of world ranks in
// each group); a group spanning the whole job is the world itself.
#define BOOST_TEST_MODULE mesh
#include "support/mpi_test.hpp"

#include <string>
#include <vector>

#include "mpiaccel/mesh.hpp"
#include "support/scratch_dir.hpp"

using namespace mpiaccel;
using namespace mpiaccel::test;

namespace {

// Every way to write `n` as an ordered product of `dims` factors.
std::vector<std::vector<int64_t>> factorizations(int64_t n, size_t dims) {
  if (dims == 1) return {{n}};
  std::vector<std::vector<int64_t>> out;
  for (int64_t f = 1; f <= n; ++f) {
    if (n % f != 0) continue;
    for (auto rest : factorizations(n / f, dims - 1)) {
      rest.insert(rest.begin(), f);
      out.push_back(rest);
    }
  }
  return out;
}

// The world ranks of this rank's group along `along` (indices into the
// dims), in the order the group should rank them.
std::vector<int64_t> expected_members(const std::vector<int64_t>& sizes, const std::vector<int64_t>& mine,
                                      const std::vector<size_t>& along) {
  std::vector<int64_t> out;
  int64_t members = 1;
  for (size_t d : along) members *= sizes[d];
  for (int64_t k = 0; k < members; ++k) {
    std::vector<int64_t> c = mine;
    int64_t rest = k;
    for (size_t i = along.size(); i-- > 0;) {
      c[along[i]] = rest % sizes[along[i]];
      rest /= sizes[along[i]];
    }
    int64_t rank = 0;
    for (size_t d = 0; d < sizes.size(); ++d) rank = rank * sizes[d] + c[d];
    out.push_back(rank);
  }
  return out;
}

std::vector<int64_t> gathered_world_ranks(Communicator& group, int world_rank) {
  std::vector<int64_t> out;
  for (const std::string& s : group.all_gather_bytes(std::to_string(world_rank))) out.push_back(std::stoll(s));
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(groups_hold_the_ranks_that_differ_only_along_them) {
  const std::vector<std::string> names = {"dp_replicate", "dp_shard", "tp"};
  const int world_rank = world().rank();
  for (size_t dims = 1; dims <= 3; ++dims) {
    for (const auto& sizes : factorizations(world().size(), dims)) {
      MeshShape shape;
      for (size_t d = 0; d < dims; ++d) shape.dims.push_back({names[3 - dims + d], sizes[d]});
      Mesh mesh(world_ptr(), shape);
      std::vector<int64_t> mine(dims);
      int64_t rest = world_rank;
      for (size_t d = dims; d-- > 0;) {
        mine[d] = rest % sizes[d];
        rest /= sizes[d];
      }
      for (size_t d = 0; d < dims; ++d) MPIACCEL_CHECK_ALL(mesh.coordinate(shape.dims[d].name) == mine[d]);
      // Every non-empty set of dimensions, in mesh order.
      for (unsigned mask = 1; mask < (1u << dims); ++mask) {
        std::vector<size_t> along;
        std::vector<std::string> group_names;
        for (size_t d = 0; d < dims; ++d)
          if (mask & (1u << d)) {
            along.push_back(d);
            group_names.push_back(shape.dims[d].name);
          }
        const auto group = mesh.group(group_names);
        const std::vector<int64_t> want = expected_members(sizes, mine, along);
        MPIACCEL_CHECK_ALL(gathered_world_ranks(*group, world_rank) == want);
        MPIACCEL_CHECK_ALL(want[static_cast<size_t>(group->rank())] == world_rank);
        if (static_cast<int>(want.size()) == world().size()) MPIACCEL_CHECK_ALL(group == mesh.world());
      }
      MPIACCEL_CHECK_ALL(mesh.dp()->size() == shape.size("dp_replicate") * shape.size("dp_shard"));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_shape_of_another_size_is_refused_with_the_numbers) {
  MeshShape shape{{"dp_shard", world().size() + 1}};
  const std::string why = message_of([&] { Mesh mesh(world_ptr(), shape); });
  MPIACCEL_CHECK_ALL(why.find("the mesh dp_shard " + std::to_string(world().size() + 1)) != std::string::npos);
  MPIACCEL_CHECK_ALL(why.find("but the job has " + std::to_string(world().size())) != std::string::npos);
}

BOOST_AUTO_TEST_CASE(one_host_holds_every_group) {
  // Every rank of this test runs on one host: a within-node dimension passes.
  Mesh mesh(world_ptr(), MeshShape{{"dp_shard", 1}, {"tp", world().size()}}, {"tp"});
  MPIACCEL_CHECK_ALL(mesh.group({"tp"})->size() == world().size());
  MPIACCEL_CHECK_ALL(mesh.describe().find("mesh dp_shard 1 × tp " + std::to_string(world().size())) == 0);
}
