// The Accelerator's mesh (accelerator_mesh.hpp).

#include "accelerator/accelerator_mesh.hpp"

#include <string>
#include <vector>

namespace mpiaccel::detail {

std::unique_ptr<Mesh> make_mesh(const Config& config, const Runtime& runtime,
                                std::shared_ptr<Communicator> world) {
  // HSDP's "ranks of a node" needs every node to run as many ranks.
  const MeshShape shape =
      mesh_shape_of(config, world->size(), uniform_ranks_per_node(*world, runtime.local_size()));
  // hybrid_group_size = 0 promises shard groups inside nodes: hold it to that.
  std::vector<std::string> within_node;
  if (strategy_kind(config) == StrategyKind::Fsdp && config.fsdp.sharding_strategy == ShardingStrategy::HybridShard &&
      config.fsdp.hybrid_group_size == 0 && config.parallelism.dp_shard_size == 0)
    within_node.push_back("dp_shard");
  // A tp group all-reduces in every layer: on one node's links, unless forced.
  if (shape.size("tp") > 1 && !config.parallelism.tp_across_nodes) within_node.push_back("tp");
  return std::make_unique<Mesh>(std::move(world), shape, within_node);
}

DataParallelShape data_parallel_shape(const MeshShape& shape) {
  return {shape.size("dp_replicate"), shape.size("dp_shard") * shape.size("cp")};
}

}  // namespace mpiaccel::detail
