#pragma once
// The device mesh: the ranks of a job as a grid of named dimensions, outermost
// first, and a communicator for each dimension and for products of them
// (docs/parallelism.md). Rank w of the world sits at the coordinates of w in
// row-major order, so the innermost dimension's ranks are consecutive: on one
// node when ranks are placed by node, as mpirun and srun do by default.
//
//   Mesh mesh(world, MeshShape{{"dp_replicate", 2}, {"dp_shard", 2}});
//   mesh.group({"dp_shard"})   // this rank's shard group (2 ranks)
//   mesh.coordinate("dp_replicate")
//
// The Accelerator builds the job's mesh from [parallelism] and [distributed]
// strategy (mesh_shape_of) and hands its data-parallel group to the strategy.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mpiaccel {

class Communicator;
struct Config;

/// One dimension: its name and size.
struct MeshDim {
  std::string name;
  int64_t size = 1;
};

/// The dimensions of a mesh, outermost first.
struct MeshShape {
  std::vector<MeshDim> dims;

  MeshShape() = default;
  MeshShape(std::initializer_list<MeshDim> d) : dims(d) {}
  /// The product of the sizes: the world size the mesh needs.
  int64_t ranks() const;
  /// The size of dimension `name`; 1 for a dimension the mesh does not have.
  int64_t size(const std::string& name) const;
  /// "dp_replicate 2 × dp_shard 2 (4 ranks)".
  std::string describe() const;
};

/// The mesh [parallelism] asks for on `world_size` ranks: (pp ×, outermost,
/// when pp_size > 1) dp_replicate × dp_shard (× cp when cp_size > 1) (× tp
/// when tp_size > 1, innermost), an `auto` size resolved, [fsdp] HYBRID_SHARD's hybrid_group_size
/// (the older way to say dp_shard; 0 = `ranks_per_node`, itself 0 when the
/// nodes run different numbers of ranks) folded in. A shape
/// that does not fit is one line with the numbers: sizes whose product is
/// not the world size, two `auto`s, a HYBRID_SHARD group that disagrees,
/// replicas under zero, a tp_size, cp_size or pp_size that does not divide
/// the world, cp with pp.
MeshShape mesh_shape_of(const Config& config, int64_t world_size, int64_t ranks_per_node);

/// The ranks each node runs when every node runs as many (`local_size` is
/// this rank's node's count), else 0. Collective over `world`.
int64_t uniform_ranks_per_node(Communicator& world, int64_t local_size);

class Mesh {
 public:
  /// Splits `world` into the groups of every dimension and of the
  /// data-parallel product ("dp": dp_replicate × dp_shard). `shape.ranks()`
  /// must equal world->size(). A dimension named in `within_node` (tensor
  /// parallelism's, later) must not span nodes: refused with the hosts named.
  /// Collective over `world`.
  Mesh(std::shared_ptr<Communicator> world, MeshShape shape,
       std::vector<std::string> within_node = {});
  ~Mesh();
  Mesh(const Mesh&) = delete;
  Mesh& operator=(const Mesh&) = delete;

  const MeshShape& shape() const { return shape_; }
  const std::shared_ptr<Communicator>& world() const { return world_; }
  /// This rank's place along dimension `name` (0 for a dimension the mesh lacks).
  int64_t coordinate(const std::string& name) const;
  /// The communicator of the ranks that differ from this one only along
  /// `dims` (their product), ordered by their coordinates along `dims`, the
  /// first dimension outermost. Prebuilt for every single dimension and for
  /// "dp"; another product is made on first use and then kept: its first
  /// call is collective over the world, with the same `dims` on every rank.
  std::shared_ptr<Communicator> group(const std::vector<std::string>& dims);
  /// group({"dp_replicate", "dp_shard"}): the data-parallel ranks.
  std::shared_ptr<Communicator> dp() { return group({"dp"}); }
  /// group({"tp"}): the tensor-parallel ranks (prebuilt with a tp
  /// dimension; without one, this rank alone, made on the first call, which
  /// is then collective).
  std::shared_ptr<Communicator> tp() { return group({"tp"}); }
  /// group({"cp"}): the ranks that split each sample's sequence (context
  /// parallelism; prebuilt with a cp dimension, otherwise as tp()).
  std::shared_ptr<Communicator> cp() { return group({"cp"}); }
  /// The ranks that hold the same parameters and average their gradients:
  /// dp(), and with a cp dimension dp × cp (each cp rank's gradient covers
  /// its part of the sequence). The strategy's group.
  std::shared_ptr<Communicator> gradient_group();
  /// group({"pp"}): the ranks of this rank's pipeline, ordered by stage
  /// (prebuilt with a pp dimension; otherwise as tp()).
  std::shared_ptr<Communicator> pp() { return group({"pp"}); }
  /// "mesh dp_replicate 1 × dp_shard 4 (4 ranks); rank 2 at (0, 2)".
  std::string describe() const;

 private:
  std::vector<std::string> expand(const std::vector<std::string>& dims) const;
  std::shared_ptr<Communicator> split_along(const std::vector<std::string>& dims);
  void check_within_node(const std::string& dim);

  std::shared_ptr<Communicator> world_;
  MeshShape shape_;
  std::vector<int64_t> coords_;
  std::map<std::vector<std::string>, std::shared_ptr<Communicator>> groups_;
};

}  // namespace mpiaccel
