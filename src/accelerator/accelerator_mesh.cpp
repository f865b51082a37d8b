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
  if (strategy_kind(config) == StrategyKind::Fsdp && config.fsdp.sharding_strategy == "HYBRID_SHARD" &&
      config.fsdp.hybrid_group_size == 0 && config.parallelism.dp_shard_size == 0)
    within_node.push_back("dp_shard");
  // A tp group all-reduces in every layer: on one node's links, unless forced.
  if (shape.size("tp") > 1 && !config.parallelism.tp_across_nodes) within_node.push_back("tp");
  return std::make_unique<Mesh>(std::move(world), shape, within_node);
}

Config strategy_config(const Config& config, const MeshShape& shape) {
  Config out = config;
  const int64_t replicas = shape.size("dp_replicate");
  if (strategy_kind(config) != StrategyKind::Fsdp ||
      (replicas == 1 && config.fsdp.sharding_strategy != "HYBRID_SHARD"))
    return out;
  FsdpConfig& fsdp = out.fsdp;
  // SHARD_GRAD_OP keeps gathered parameters from forward to backward; as HSDP
  // it keeps doing so.
  if (fsdp.sharding_strategy == "SHARD_GRAD_OP") fsdp.reshard_after_forward = false;
  fsdp.sharding_strategy = "HYBRID_SHARD";
  fsdp.hybrid_group_size = shape.size("dp_shard") * shape.size("cp");  // a cp group shards with its dp_shard group
  return out;
}

}  // namespace mpiaccel::detail
