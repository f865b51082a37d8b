// The estimate as a table (like `accelerate estimate-memory`) and as JSON.

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "mpiaccel/estimate.hpp"
#include "mpiaccel/model_family.hpp"

namespace mpiaccel {
namespace {

std::string human(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = double(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  if (unit == 0) {
    std::snprintf(text, sizeof(text), "%lld B", static_cast<long long>(bytes));
  } else {
    std::snprintf(text, sizeof(text), "%.2f %s", value, units[unit]);
  }
  return text;
}

std::string grouped(int64_t value) {
  std::string digits = std::to_string(value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string row_name(const MemoryEstimate& row) {
  std::string name = row.kind == StrategyKind::Fsdp ? "fsdp/zero3" : row.strategy;
  return row.offload ? name + "+offload" : name;
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string format_estimate_table(const Config& config, const ModelFootprint& model,
                                  const std::vector<MemoryEstimate>& rows) {
  std::ostringstream out;
  const int world = rows.empty() ? 1 : rows.front().world_size;
  const int tp = rows.empty() ? 1 : rows.front().tp_size;
  out << "Memory per rank for " << model.kind << ": " << grouped(model.params) << " parameters";
  if (tp > 1) out << " (one rank's slices at tp " << tp << ")";
  if (model.units > 0)
    out << " (" << model.units << " units, largest " << grouped(model.largest_unit_params) << "; "
        << grouped(model.root_params) << " outside units)";
  out << ", " << world << " rank" << (world == 1 ? "" : "s");
  const int pp = rows.empty() ? 1 : rows.front().pp_size;
  if (tp > 1 || pp > 1) {
    out << " (" << (pp > 1 ? "pp " + std::to_string(pp) + " × " : std::string()) << world / tp / pp
        << " data-parallel";
    if (tp > 1) out << " × tp " << tp << (config.parallelism.sequence_parallel ? ", sequence parallel" : "");
    if (pp > 1)
      out << "; the rows: the rank of the heaviest stage, which holds part of the model, "
          << name_of(config.parallelism.pp_schedule) << " keeping its microbatches in flight";
    out << ")";
  }
  out << ", " << name_of(config.optimizer.name) << ", batch "
      << config.train.batch_size;
  if (model_family(model.kind).input == ModelFamily::Input::Tokens) out << " x " << config.train.seq_len << " tokens";
  out << " per rank" << (config.fsdp.activation_checkpointing ? ", activation checkpointing" : "");
  if (config.parallelism.cp_size > 1)
    out << ", context parallel: " << config.train.seq_len / config.parallelism.cp_size
        << " tokens of each sequence on each of " << config.parallelism.cp_size
        << " cp ranks (the strategy shards over them too)";
  out << "\n";

  const std::vector<std::string> header = {"strategy", "precision", "params", "grads", "optimizer",
                                           "gathered", "activations", "device peak", "host"};
  std::vector<std::vector<std::string>> cells;
  for (const MemoryEstimate& r : rows)
    cells.push_back({row_name(r), r.precision, human(r.param_bytes), human(r.grad_bytes), human(r.optimizer_bytes),
                     human(r.gathered_bytes), human(r.activation_bytes), human(r.device_peak_bytes()),
                     human(r.host_bytes())});
  std::vector<size_t> width(header.size());
  for (size_t i = 0; i < header.size(); ++i) {
    width[i] = header[i].size();
    for (const auto& line : cells) width[i] = std::max(width[i], line[i].size());
  }
  auto rule = [&] {
    out << "+";
    for (size_t w : width) out << std::string(w + 2, '-') << "+";
    out << "\n";
  };
  auto line = [&](const std::vector<std::string>& values) {
    out << "|";
    for (size_t i = 0; i < values.size(); ++i) {
      // Names left-aligned, sizes right-aligned.
      const std::string pad(width[i] - values[i].size(), ' ');
      out << " " << (i < 2 ? values[i] + pad : pad + values[i]) << " |";
    }
    out << "\n";
  };
  rule();
  line(header);
  rule();
  std::string last_precision;
  for (size_t r = 0; r < cells.size(); ++r) {
    if (!last_precision.empty() && rows[r].precision != last_precision) rule();
    last_precision = rows[r].precision;
    line(cells[r]);
  }
  rule();
  out << "params+grads+optimizer: ZeRO (SC'20) accounting, K = 12 bytes/param for mixed-precision "
         "AdamW; activations: Korthikanti et al. (2022), per micro-batch; gathered: FSDP's largest unit "
         "and the prefetched next (docs/memory.md).\n";
  return out.str();
}

std::string format_estimate_json(const Config& config, const ModelFootprint& model,
                                 const std::vector<MemoryEstimate>& rows) {
  std::ostringstream out;
  out << "{\"model\": {\"kind\": " << json_string(model.kind) << ", \"params\": " << model.params
      << ", \"largest_unit_params\": " << model.largest_unit_params << ", \"root_params\": " << model.root_params
      << ", \"units\": " << model.units << "}, \"world_size\": " << (rows.empty() ? 1 : rows.front().world_size)
      << ", \"tp_size\": " << (rows.empty() ? 1 : rows.front().tp_size)
      << ", \"pp_size\": " << (rows.empty() ? 1 : rows.front().pp_size)
      << ", \"optimizer\": " << json_string(name_of(config.optimizer.name)) << ", \"batch_size\": " << config.train.batch_size
      << ", \"seq_len\": " << config.train.seq_len << ", \"activation_checkpointing\": "
      << (config.fsdp.activation_checkpointing ? "true" : "false") << ", \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const MemoryEstimate& r = rows[i];
    out << (i ? ", " : "") << "{\"strategy\": " << json_string(r.strategy)
        << ", \"offload\": " << (r.offload ? "true" : "false") << ", \"precision\": " << json_string(r.precision)
        << ", \"param_bytes\": " << r.param_bytes << ", \"grad_bytes\": " << r.grad_bytes
        << ", \"optimizer_bytes\": " << r.optimizer_bytes << ", \"gathered_bytes\": " << r.gathered_bytes
        << ", \"activation_bytes\": " << r.activation_bytes << ", \"device_peak_bytes\": " << r.device_peak_bytes()
        << ", \"host_bytes\": " << r.host_bytes()
        << ", \"host_param_bytes\": " << r.host_param_bytes << ", \"host_grad_bytes\": " << r.host_grad_bytes
        << ", \"host_optimizer_bytes\": " << r.host_optimizer_bytes << "}";
  }
  out << "]}\n";
  return out.str();
}

}  // namespace mpiaccel
