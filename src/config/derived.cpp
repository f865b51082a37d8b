// What other modules derive from a Config: the strategy kind, the resume
// source, the report targets, list values; the choice names' matching.

#include "mpiaccel/config.hpp"
#include "mpiaccel/error.hpp"
#include "config/value_text.hpp"

namespace mpiaccel {

StrategyKind strategy_kind(const Config& config) {
  switch (config.distributed.strategy) {
    case StrategyChoice::No: return StrategyKind::NoDist;
    case StrategyChoice::Ddp: return StrategyKind::Ddp;
    case StrategyChoice::Fsdp: return StrategyKind::Fsdp;
    case StrategyChoice::Zero: break;
  }
  switch (config.zero.stage) {
    case 0: return StrategyKind::Ddp;
    case 1: return StrategyKind::Zero1;
    case 2: return StrategyKind::Zero2;
    case 3: return StrategyKind::Zero3;
    default: break;
  }
  MPIACCEL_THROW("[zero] stage " + std::to_string(config.zero.stage) + " is out of range; accepted: 0..3");
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

ResumeFrom resume_from(const CheckpointConfig& checkpoint) {
  if (checkpoint.resume == "none") return {ResumeFrom::Kind::None, ""};
  if (checkpoint.resume == "latest") return {ResumeFrom::Kind::Latest, ""};
  return {ResumeFrom::Kind::Path, checkpoint.resume};
}

ReportTargets report_targets(const LoggingConfig& logging) {
  ReportTargets targets;
  const std::vector<std::string> items = split_list(logging.report_to);
  for (const std::string& item : items) {
    const bool alone = items.size() == 1;
    if (item == "jsonl") targets.jsonl = true;
    else if (item == "tensorboard") targets.tensorboard = true;
    else if (alone && item == "all") targets.jsonl = targets.tensorboard = true;
    else if (alone && item == "none") continue;
    else
      throw ConfigError("[logging] report_to: '" + item + "' is unknown" +
                            (item == "all" || item == "none" ? " beside other names" : "") +
                            "; accepted: a list of jsonl and tensorboard, or all, or none",
                        __FILE__, __LINE__);
  }
  return targets;
}

namespace detail {

bool same_choice_name(const std::string& text, const char* name) { return lower(text) == lower(name); }

void throw_unknown_choice(const std::string& what, const std::string& text, const std::string& accepted) {
  MPIACCEL_THROW(what + " = " + text + " is unknown; accepted: " + accepted);
}

}  // namespace detail
}  // namespace mpiaccel
