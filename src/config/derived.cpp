// What other modules derive from a Config: the strategy kind, list values.

#include "mpiaccel/config.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel {

StrategyKind strategy_kind(const Config& config) {
  const std::string& name = config.distributed.strategy;
  if (name == "no") return StrategyKind::NoDist;
  if (name == "ddp") return StrategyKind::Ddp;
  if (name == "fsdp") return StrategyKind::Fsdp;
  if (name == "zero") {
    switch (config.zero.stage) {
      case 0: return StrategyKind::Ddp;
      case 1: return StrategyKind::Zero1;
      case 2: return StrategyKind::Zero2;
      case 3: return StrategyKind::Zero3;
      default: break;
    }
    MPIACCEL_THROW("[zero] stage " + std::to_string(config.zero.stage) + " is out of range; accepted: 0..3");
  }
  MPIACCEL_THROW("unknown [distributed] strategy '" + name + "'; accepted: no|ddp|fsdp|zero");
}

bool shards_parameters(const Config& config) {
  const StrategyKind kind = strategy_kind(config);
  return kind == StrategyKind::Fsdp || kind == StrategyKind::Zero3;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(begin, end - begin);
    const size_t first = item.find_first_not_of(" \t");
    if (first != std::string::npos) items.push_back(item.substr(first, item.find_last_not_of(" \t") - first + 1));
    begin = end + 1;
  }
  return items;
}

}  // namespace mpiaccel
