// `mpiaccel estimate-memory [--config F]... [--world N] [--json] [section.key=value ...]`:
// per-rank bytes of parameters, gradients, optimizer state, gathered units
// and activations for every strategy and precision (src/estimate). Runs
// without MPI: nothing is launched and no model is built.

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "command.hpp"
#include "interop/hf_pretrained.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/config_files.hpp"
#include "mpiaccel/estimate.hpp"

namespace mpiaccel::tool {
namespace {

struct EstimateArguments {
  std::vector<std::string> config_paths;
  int world = 0;  // 0: [launch] num_processes
  bool json = false;
  std::vector<std::string> overrides;
};

EstimateArguments parse_estimate_arguments(const std::vector<std::string>& args) {
  EstimateArguments out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--config" || a == "--world") {
      if (i + 1 >= args.size()) throw UsageError(a + " needs a value");
      const std::string& value = args[++i];
      if (a == "--config") {
        out.config_paths.push_back(value);
        continue;
      }
      char* end = nullptr;
      const long world = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || world < 1 || world > 1000000)
        throw UsageError("--world '" + value + "' is not a rank count (1 or more)");
      out.world = static_cast<int>(world);
    } else if (a == "--json") {
      out.json = true;
    } else if (a.find('=') != std::string::npos && a[0] != '-') {
      out.overrides.push_back(a);
    } else {
      throw UsageError("unexpected argument '" + a + "' (overrides are section.key=value)");
    }
  }
  return out;
}

int run_estimate_memory(const std::vector<std::string>& args, int*, char***) {
  const EstimateArguments parsed = parse_estimate_arguments(args);
  ResolvedConfig resolved = resolve_config_files(parsed.config_paths, parsed.overrides);
  const int world = parsed.world > 0 ? parsed.world : static_cast<int>(resolved.config.launch.num_processes);
  apply_batch_arithmetic(resolved, world);  // a DeepSpeed train_batch_size sets the micro batch
  // A Hugging Face directory in [model] init_from decides the model, as `train` takes it.
  std::string path, text;
  if (detail::read_pretrained_config(resolved.config.model.init_from, &path, &text)) {
    const std::string taken = detail::resolve_pretrained_config(resolved, text, path);
    if (!taken.empty()) std::cerr << "[model] init_from: from " << path << ": " << taken << "\n";
  }
  const Config& config = resolved.config;
  const ModelSpec spec = ModelSpec::from(config.model, config.train.seq_len);
  const ModelFootprint model = model_footprint(config.train.model, spec, config.parallelism.tp_size);
  const std::vector<MemoryEstimate> rows = estimate_all(config, world);
  std::cout << (parsed.json ? format_estimate_json(config, model, rows) : format_estimate_table(config, model, rows));
  return 0;
}

}  // namespace

extern const Command kEstimateMemoryCommand = {
    "estimate-memory", "per-rank memory of params, grads, optimizer state and activations per strategy",
    "usage: mpiaccel estimate-memory [--config FILE]... [--world N] [--json] [section.key=value ...]\n"
    "\n"
    "Estimates the bytes each rank needs for the model of FILE ([train] model, [model],\n"
    "[train] seq_len and batch_size, [optimizer] name) under every strategy (ddp, zero1,\n"
    "zero2, fsdp = zero3, each with and without offload) and precision (fp32, bf16, fp16):\n"
    "parameters, gradients and optimizer state by the ZeRO paper's accounting (K = 12\n"
    "bytes per parameter for mixed-precision AdamW), FSDP's gathered units, and the\n"
    "activations of one micro-batch (Korthikanti et al.; with [fsdp]\n"
    "activation_checkpointing = true only the units' inputs). Nothing is allocated.\n"
    "\n"
    "  --config FILE  the run's config, repeatable, in any format `mpiaccel train` reads\n"
    "                 (default: the built-in defaults)\n"
    "  --world N      ranks (default: [launch] num_processes)\n"
    "  --json         one JSON object with exact byte counts instead of the table\n"
    "  section.key=value  overrides, as for `mpiaccel train`\n"
    "\n"
    "Exit status: 0, 1 on a bad config, 2 on a usage error. docs/memory.md explains the formulas.\n",
    run_estimate_memory};

}  // namespace mpiaccel::tool
