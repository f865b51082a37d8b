// Shard and replica groups of an FSDP strategy (see fsdp_comms.hpp).

#include "fsdp/fsdp_comms.hpp"


#include <map>
#include <string>
#include <vector>

#include "core/host_name.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {
namespace {

struct Grouping {
  int shard_color = 0;    ///< which shard group
  int replica_color = 0;  ///< place inside it
  int groups = 1;
};

Grouping hybrid_grouping(const FsdpConfig& config, Communicator& world) {
  const int size = world.size();
  const int rank = world.rank();
  Grouping g;
  if (config.hybrid_group_size > 0) {
    const int64_t group = config.hybrid_group_size;
    MPIACCEL_CHECK(size % group == 0,
                   "[fsdp] hybrid_group_size = " + std::to_string(group) +
                       " does not divide the " + std::to_string(size) +
                       " ranks; pick a divisor (or 0 for the ranks of one node)");
    g.shard_color = static_cast<int>(rank / group);
    g.replica_color = static_cast<int>(rank % group);
    g.groups = static_cast<int>(size / group);
    return g;
  }
  // Every rank sees the same host list, so every rank reaches the same verdict.
  const std::vector<std::string> hosts = world.all_gather_bytes(local_host_name());
  std::map<std::string, int> first_seen;
  std::map<std::string, int> count;
  for (const std::string& h : hosts) {
    first_seen.emplace(h, static_cast<int>(first_seen.size()));
    ++count[h];
  }
  const std::string& mine = hosts[static_cast<size_t>(rank)];
  for (const auto& [host, n] : count)
    MPIACCEL_CHECK(n == count[mine],
                   "[fsdp] HYBRID_SHARD with hybrid_group_size = 0 shards inside each node, but "
                   "node " + host + " runs " + std::to_string(n) + " ranks and node " + mine +
                       " runs " + std::to_string(count[mine]) +
                       "; launch the same number of ranks per node or set hybrid_group_size");
  g.shard_color = first_seen[mine];
  for (int r = 0; r < rank; ++r) g.replica_color += hosts[static_cast<size_t>(r)] == mine ? 1 : 0;
  g.groups = static_cast<int>(first_seen.size());
  return g;
}

// hpZ under FULL_SHARD (the shard group is the world): a node's ranks, or
// secondary_partition_size consecutive ranks.
std::shared_ptr<Communicator> secondary_group(const FsdpConfig& config, Communicator& world) {
  const int64_t group = config.secondary_partition_size;
  if (group == 0) {
    std::shared_ptr<Communicator> node = world.split_by_node();
    // Every rank sees every node's size, so every rank reaches the same verdict.
    for (const std::string& size : world.all_gather_bytes(std::to_string(node->size())))
      MPIACCEL_CHECK(size == std::to_string(node->size()),
                     "secondary_partition_size = 0 (ZeRO++ hpZ) groups the ranks of each node, but the nodes run " +
                         size + " and " + std::to_string(node->size()) +
                         " ranks; launch the same number per node or give the group's size");
    return node;
  }
  MPIACCEL_CHECK(world.size() % group == 0,
                 "secondary_partition_size = " + std::to_string(group) + " (ZeRO++ hpZ) does not divide the " +
                     std::to_string(world.size()) + " ranks; pick a divisor (the ranks of a node), or 0 for one node's");
  return world.split(static_cast<int>(world.rank() / group), world.rank());
}

}  // namespace

FsdpComms make_fsdp_comms(const FsdpConfig& config, std::shared_ptr<Communicator> world) {
  FsdpComms comms;
  comms.world = world;
  Grouping g;
  if (config.sharding_strategy == ShardingStrategy::HybridShard) g = hybrid_grouping(config, *world);
  // Separate communicators (each with its own thread) for all-gathers and
  // reduce-scatters: each kind keeps its own order, and both run at once.
  comms.gather = world->split(g.shard_color, world->rank());
  comms.reduce = world->split(g.shard_color, world->rank());
  if (g.groups > 1) comms.replica = world->split(g.replica_color, world->rank());
  if (config.secondary_partition_size != 1) comms.secondary = secondary_group(config, *world);
  return comms;
}

}  // namespace mpiaccel::detail
