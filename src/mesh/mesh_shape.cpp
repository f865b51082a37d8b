// MeshShape and the shape a config asks for (mesh.hpp).

#include <string>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/mesh.hpp"

namespace mpiaccel {
namespace {

std::string n(int64_t v) { return std::to_string(v); }

// [fsdp] HYBRID_SHARD's groups (the older way to give dp_shard), 0 when the
// config does not ask for them.
int64_t hybrid_group(const Config& config, int64_t world, int64_t ranks_per_node) {
  if (!shards_parameters(config) || strategy_kind(config) == StrategyKind::Zero3 ||
      config.fsdp.sharding_strategy != ShardingStrategy::HybridShard)
    return 0;
  MPIACCEL_CHECK(config.fsdp.hybrid_group_size > 0 || ranks_per_node > 0,
                 "[fsdp] HYBRID_SHARD with hybrid_group_size = 0 shards inside each node, but the nodes "
                 "run different numbers of ranks; launch the same number of ranks per node or set "
                 "hybrid_group_size");
  const int64_t group = config.fsdp.hybrid_group_size > 0 ? config.fsdp.hybrid_group_size : ranks_per_node;
  MPIACCEL_CHECK(group >= 1 && world % group == 0,
                 "[fsdp] hybrid_group_size = " + n(group) + " does not divide the " + n(world) +
                     " ranks; pick a divisor (or 0 for the ranks of one node)");
  return group;
}

// The data-parallel ranks left by pp_size and tp_size, and how messages name them.
struct DataParallelRanks {
  int64_t count;
  std::string text;  // "6 ranks" or "3 data-parallel ranks (6 / tp_size 2)"
};

DataParallelRanks data_parallel_ranks(int64_t world, int64_t pp, int64_t cp, int64_t tp) {
  MPIACCEL_CHECK(pp >= 1 && world % pp == 0, "[parallelism] pp_size " + n(pp) + " does not divide the " +
                                                 n(world) + " ranks; pick a divisor of the world size");
  MPIACCEL_CHECK(tp >= 1 && (world / pp) % tp == 0,
                 "[parallelism] tp_size " + n(tp) + " does not divide the " + n(world / pp) + " ranks" +
                     (pp > 1 ? " of a pipeline stage (" + n(world) + " / pp_size " + n(pp) + ")" : std::string()) +
                     "; pick a divisor of the world size");
  MPIACCEL_CHECK(cp >= 1 && (world / pp / tp) % cp == 0,
                 "[parallelism] cp_size " + n(cp) + " does not divide the " + n(world / pp / tp) + " ranks" +
                     (tp > 1 ? " left by tp_size " + n(tp) : std::string()) + "; pick a divisor of the world size");
  MPIACCEL_CHECK(cp == 1 || pp == 1, "[parallelism] cp_size " + n(cp) + " with pp_size " + n(pp) +
                                         ": context parallelism inside pipeline stages is not built yet; "
                                         "set one of them to 1");
  if (tp == 1 && pp == 1 && cp == 1) return {world, n(world) + " ranks"};
  std::string of = n(world);
  if (pp > 1) of += " / pp_size " + n(pp);
  if (cp > 1) of += " / cp_size " + n(cp);
  if (tp > 1) of += " / tp_size " + n(tp);
  const int64_t count = world / pp / cp / tp;
  return {count, n(count) + " data-parallel ranks (" + of + ")"};
}

}  // namespace

int64_t MeshShape::ranks() const {
  int64_t product = 1;
  for (const MeshDim& d : dims) product *= d.size;
  return product;
}

int64_t MeshShape::size(const std::string& name) const {
  for (const MeshDim& d : dims)
    if (d.name == name) return d.size;
  return 1;
}

std::string MeshShape::describe() const {
  std::string text;
  for (const MeshDim& d : dims) text += (text.empty() ? "" : " × ") + d.name + " " + n(d.size);
  return text + " (" + n(ranks()) + (ranks() == 1 ? " rank)" : " ranks)");
}

MeshShape mesh_shape_of(const Config& config, int64_t world_size, int64_t ranks_per_node) {
  const int64_t tp = config.parallelism.tp_size;
  const int64_t pp = config.parallelism.pp_size;
  const int64_t cp = config.parallelism.cp_size;
  const DataParallelRanks dp = data_parallel_ranks(world_size, pp, cp, tp);
  const int64_t world = dp.count;
  int64_t replicate = config.parallelism.dp_replicate_size;
  int64_t shard = config.parallelism.dp_shard_size;
  const int64_t group = hybrid_group(config, world, ranks_per_node > 0 && ranks_per_node % (tp * cp) == 0
                                                          ? ranks_per_node / (tp * cp) : 0);
  if (group > 0) {  // the groups give dp_shard; the replicas are what is left
    if (shard == 0) shard = group;
    if (replicate == 1) replicate = 0;
  }
  MPIACCEL_CHECK(replicate != 0 || shard != 0,
                 "[parallelism] dp_replicate_size and dp_shard_size are both auto; set one of them");
  const int64_t known = replicate == 0 ? shard : shard == 0 ? replicate : 0;
  if (known > 0) {
    MPIACCEL_CHECK(world % known == 0, "[parallelism] " +
                                           std::string(replicate == 0 ? "dp_shard_size " : "dp_replicate_size ") +
                                           n(known) + " does not divide the " + dp.text +
                                           "; pick a divisor, or give both sizes");
    (replicate == 0 ? replicate : shard) = world / known;
  }
  MPIACCEL_CHECK(replicate * shard == world,
                 "[parallelism] dp_replicate_size " + n(replicate) + " × dp_shard_size " + n(shard) + " = " +
                     n(replicate * shard) + ", but the job has " + dp.text + "; make the product " +
                     n(world) + " or set one size to auto");
  MPIACCEL_CHECK(group == 0 || group == shard,
                 "[fsdp] HYBRID_SHARD groups of " + n(group) + " ranks, but [parallelism] dp_shard_size is " +
                     n(shard) + "; set one of them (dp_shard_size is the mesh's name for the same)");
  const StrategyKind kind = strategy_kind(config);
  const bool zero = kind == StrategyKind::Zero1 || kind == StrategyKind::Zero2 || kind == StrategyKind::Zero3;
  MPIACCEL_CHECK(replicate == 1 || !zero,
                 "[parallelism] dp_replicate_size " + n(replicate) +
                     ": ZeRO shards over every data-parallel rank; replicas of sharded groups are HSDP "
                     "(strategy = fsdp), or set dp_replicate_size = 1");
  MeshShape shape{{"dp_replicate", replicate}, {"dp_shard", shard}};
  if (pp > 1) shape.dims.insert(shape.dims.begin(), {"pp", pp});
  if (cp > 1) shape.dims.push_back({"cp", cp});
  if (tp > 1) shape.dims.push_back({"tp", tp});
  return shape;
}

int64_t uniform_ranks_per_node(Communicator& world, int64_t local_size) {
  const int64_t most = world.all_reduce_int(local_size, ReduceOp::Max);
  const int64_t least = world.all_reduce_int(local_size, ReduceOp::Min);
  return most == least ? most : 0;
}

}  // namespace mpiaccel
