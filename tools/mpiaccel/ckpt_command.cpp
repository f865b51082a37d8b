// `mpiaccel ckpt`: inspect, verify, compare and export checkpoints in one
// process, without mpirun (the serial HDF5 driver; no MPI_Init).

#include <ATen/ATen.h>

#include <cmath>
#include <cstring>
#include <set>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "ckpt_helpers.hpp"

#include "interop/hf_model.hpp"
#include "core/json_line.hpp"
#include "command.hpp"
#include "mpiaccel/checkpoint.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::tool {

// One JSON escaper for the whole tool: the metrics log's (core/json_line.hpp).
std::string json_string(const std::string& text) { return "\"" + detail::json_escape(text) + "\""; }

namespace {

const char* kUsage =
    "usage: mpiaccel ckpt ls PATH [--json]\n"
    "       mpiaccel ckpt show PATH TENSOR [--head N]\n"
    "       mpiaccel ckpt verify PATH\n"
    "       mpiaccel ckpt diff A B [--atol X]\n"
    "       mpiaccel ckpt export PATH -o OUT.safetensors [--with-optimizer]\n"
    "       mpiaccel ckpt export PATH --format hf -o DIR [--max-shard-size BYTES]\n\n"
    "Reads mpiaccel checkpoints (one HDF5 file each) in this process; no mpirun needed.\n"
    "PATH is a checkpoint file or a checkpoint directory (then the file its `latest` names).\n\n"
    "  ls      step, world size, strategy, config summary, trainer state and every tensor's\n"
    "          shape, dtype, bytes and shard count; reads no tensor data. --json: as JSON.\n"
    "  show    a tensor's first N values (default 10), min, max, mean and L2 norm.\n"
    "  verify  recomputes the CRC32C of every saved shard and checks every tensor is\n"
    "          complete; exit 0 only if the file is intact, else names each damaged tensor.\n"
    "  diff    compares two checkpoints tensor by tensor (names, shapes, dtypes, values\n"
    "          within --atol, default 0 = bit-identical); exit 1 if they differ.\n"
    "  export  writes the model's consolidated tensors to a safetensors file, named as in\n"
    "          the model (dtypes kept, BF16 as BF16); --with-optimizer writes every tensor,\n"
    "          optimizer state included, under its checkpoint name (model/..., optim/...).\n"
    "          --format hf writes a directory that transformers' GPT2LMHeadModel (a GPT) or\n"
    "          LlamaForCausalLM (a Llama) .from_pretrained loads (their names and layout,\n"
    "          config.json, and a BPE run's tokenizer for AutoTokenizer),\n"
    "          sharded with an index above --max-shard-size (default 5000000000).\n\n"
    "Exit status: 0 success, 1 failure (or difference / damage), 2 usage error.\n";

struct Args {
  std::vector<std::string> positional;
  bool json = false, with_optimizer = false;
  std::string out, format = "safetensors";
  int64_t max_shard_bytes = int64_t{5} * 1000 * 1000 * 1000;
  double atol = 0.0;
  int64_t head = 10;
};

Args parse_ckpt_args(const std::vector<std::string>& args) {
  Args a;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= args.size()) throw UsageError(std::string(flag) + " needs a value");
      return args[++i];
    };
    try {
      if (arg == "--json") a.json = true;
      else if (arg == "--model-only") a.with_optimizer = false;  // the default; kept for scripts
      else if (arg == "--with-optimizer") a.with_optimizer = true;
      else if (arg == "--format") a.format = value("--format");
      else if (arg == "--max-shard-size") a.max_shard_bytes = std::stoll(value("--max-shard-size"));
      else if (arg == "-o" || arg == "--output") a.out = value("-o");
      else if (arg == "--atol") a.atol = std::stod(value("--atol"));
      else if (arg == "--head") a.head = std::stoll(value("--head"));
      else if (arg.size() > 1 && arg[0] == '-') throw UsageError("unknown option '" + arg + "'");
      else a.positional.push_back(arg);
    } catch (const std::logic_error&) {  // stod/stoll
      throw UsageError("bad number after " + arg);
    }
  }
  return a;
}

void want_positional(const Args& a, size_t n, const char* what) {
  if (a.positional.size() != n)
    throw UsageError(std::string(what) + " takes " + std::to_string(n) + " argument(s), got " +
                     std::to_string(a.positional.size()));
}

std::string shape_of(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string human_bytes(int64_t bytes) {
  char text[32];
  if (bytes < 1024) std::snprintf(text, sizeof text, "%lld B", static_cast<long long>(bytes));
  else if (bytes < (1 << 20)) std::snprintf(text, sizeof text, "%.1f KiB", bytes / 1024.0);
  else if (bytes < (1LL << 30)) std::snprintf(text, sizeof text, "%.1f MiB", bytes / 1048576.0);
  else std::snprintf(text, sizeof text, "%.2f GiB", bytes / 1073741824.0);
  return text;
}

std::string config_summary(const std::string& config) {
  int lines = 0;
  std::string sections;
  std::istringstream in(config);
  std::string line;
  while (std::getline(in, line)) {
    ++lines;
    const auto start = line.find_first_not_of(" \t");
    if (start != std::string::npos && line[start] == '[') {
      const auto end = line.find(']', start);
      if (end != std::string::npos) sections += (sections.empty() ? "" : " ") + line.substr(start, end - start + 1);
    }
  }
  if (config.empty()) return "(none)";
  return std::to_string(lines) + " lines" + (sections.empty() ? "" : ", sections " + sections);
}

int run_ls(const Args& a) {
  want_positional(a, 1, "ls");
  CheckpointReader reader(a.positional[0]);
  const CheckpointInfo& info = reader.info();
  int64_t total = 0;
  for (const auto& t : info.tensors) total += t.bytes;
  std::ostringstream out;
  if (a.json) {
    auto map_json = [](const std::map<std::string, std::string>& m) {
      std::string s = "{";
      for (const auto& [k, v] : m) s += (s.size() > 1 ? "," : "") + json_string(k) + ":" + json_string(v);
      return s + "}";
    };
    out << "{\"path\":" << json_string(info.path) << ",\"format_version\":" << info.format_version
        << ",\"step\":" << info.step << ",\"world_size\":" << info.world_size
        << ",\"strategy\":" << json_string(info.strategy)
        << ",\"mpiaccel_version\":" << json_string(info.mpiaccel_version)
        << ",\"torch_version\":" << json_string(info.torch_version)
        << ",\"created_utc\":" << json_string(info.created_utc)
        << ",\"config\":" << json_string(info.config_text) << ",\"trainer\":" << map_json(info.trainer)
        << ",\"attributes\":" << map_json(info.attributes) << ",\"bytes\":" << total
        << ",\"tensors\":[";
    for (size_t i = 0; i < info.tensors.size(); ++i) {
      const auto& t = info.tensors[i];
      out << (i ? "," : "") << "{\"name\":" << json_string(t.name) << ",\"dtype\":\""
          << checkpoint_dtype_name(t.dtype) << "\",\"shape\":[";
      for (size_t d = 0; d < t.shape.size(); ++d) out << (d ? "," : "") << t.shape[d];
      out << "],\"bytes\":" << t.bytes << ",\"shards\":[";
      for (size_t s = 0; s < t.shards.size(); ++s) {
        const auto& sh = t.shards[s];
        out << (s ? "," : "") << "{\"rank\":" << sh.rank << ",\"first_row\":" << sh.first_row
            << ",\"rows\":" << sh.rows << ",\"crc32c\":" << sh.crc32c << "}";
      }
      out << "]}";
    }
    out << "]}\n";
  } else {
    out << info.path << "\n"
        << "  step " << info.step << ", world size " << info.world_size << ", strategy "
        << (info.strategy.empty() ? "-" : info.strategy) << ", format " << info.format_version
        << "\n  written " << info.created_utc << " by mpiaccel " << info.mpiaccel_version
        << " (torch " << info.torch_version << ")\n"
        << "  config: " << config_summary(info.config_text) << "\n";
    for (const auto& [k, v] : info.trainer)
      out << "  trainer " << k << " = " << (v.size() > 60 ? v.substr(0, 57) + "..." : v) << "\n";
    for (const auto& [k, v] : info.attributes) out << "  attribute " << k << " = " << v << "\n";
    out << "  " << info.tensors.size() << " tensors, " << human_bytes(total) << "\n\n";
    size_t width = 6;
    for (const auto& t : info.tensors) width = std::max(width, t.name.size());
    char row[256];
    std::snprintf(row, sizeof row, "%-*s  %-9s %-20s %12s  %s\n", static_cast<int>(width), "tensor",
                  "dtype", "shape", "bytes", "shards");
    out << row;
    for (const auto& t : info.tensors) {
      out << t.name << std::string(width - t.name.size(), ' ');
      std::snprintf(row, sizeof row, "  %-9s %-20s %12lld  %zu\n", checkpoint_dtype_name(t.dtype).c_str(),
                    shape_of(t.shape).c_str(), static_cast<long long>(t.bytes), t.shards.size());
      out << row;
    }
  }
  std::cout << out.str();
  return 0;
}

int run_show(const Args& a) {
  want_positional(a, 2, "show");
  CheckpointReader reader(a.positional[0]);
  const std::string& name = a.positional[1];
  const TensorInfo* info = reader.info().find(name);
  if (!info) {
    std::string names;
    for (const auto& t : reader.info().tensors) names += (names.empty() ? "" : ", ") + t.name;
    MPIACCEL_THROW("checkpoint " + reader.info().path + " has no tensor " + name +
                   " (it has: " + names + ")");
  }
  at::Tensor t = reader.read(name);
  at::Tensor values = t.to(at::kDouble).reshape({-1});
  std::ostringstream out;
  out.precision(8);
  out << name << ": " << checkpoint_dtype_name(info->dtype) << " " << shape_of(info->shape) << ", "
      << info->shards.size() << " shard(s), " << info->bytes << " bytes\n";
  const int64_t n = values.numel();
  out << "  head:";
  const double* v = values.data_ptr<double>();
  for (int64_t i = 0; i < std::min<int64_t>(n, a.head); ++i) out << " " << v[i];
  if (n > a.head) out << " ...";
  out << "\n";
  if (n > 0) {
    out << "  min " << values.min().item<double>() << "  max " << values.max().item<double>()
        << "  mean " << values.mean().item<double>() << "  norm " << values.norm().item<double>()
        << "\n";
  }
  std::cout << out.str();
  return 0;
}

int run_verify(const Args& a) {
  want_positional(a, 1, "verify");
  CheckpointReader reader(a.positional[0]);  // structure and completeness
  const auto problems = reader.verify();
  const CheckpointInfo& info = reader.info();
  if (!problems.empty()) {
    std::set<std::string> damaged;
    for (const auto& p : problems) {
      std::cout << "DAMAGED " << p << "\n";
      damaged.insert(p.substr(0, p.find(':')));
    }
    std::cerr << "mpiaccel: ckpt: " << info.path << ": " << damaged.size() << " of "
              << info.tensors.size() << " tensors damaged\n";
    return 1;
  }
  size_t shards = 0;
  int64_t bytes = 0;
  for (const auto& t : info.tensors) {
    shards += t.shards.size();
    bytes += t.bytes;
  }
  std::cout << "ok " << info.path << ": step " << info.step << ", " << info.tensors.size()
            << " tensors, " << shards << " shards, " << bytes << " bytes verified\n";
  return 0;
}

int run_diff(const Args& a) {
  want_positional(a, 2, "diff");
  CheckpointReader left(a.positional[0]), right(a.positional[1]);
  int differences = 0;
  auto report = [&](const std::string& line) {
    std::cout << line << "\n";
    ++differences;
  };
  for (const auto& t : left.info().tensors) {
    const TensorInfo* other = right.info().find(t.name);
    if (!other) {
      report("only in A: " + t.name);
      continue;
    }
    if (t.shape != other->shape || t.dtype != other->dtype) {
      report("differ: " + t.name + ": " + checkpoint_dtype_name(t.dtype) + " " + shape_of(t.shape) +
             " vs " + checkpoint_dtype_name(other->dtype) + " " + shape_of(other->shape));
      continue;
    }
    at::Tensor x = left.read(t.name), y = right.read(t.name);
    if (a.atol == 0.0) {
      if (t.bytes && std::memcmp(x.data_ptr(), y.data_ptr(), static_cast<size_t>(t.bytes)) != 0) {
        const double max_diff = (x.to(at::kDouble) - y.to(at::kDouble)).abs().max().item<double>();
        std::ostringstream line;
        line << "differ: " << t.name << ": max |a-b| " << max_diff << " (bits differ)";
        report(line.str());
      }
    } else if (t.bytes) {
      const at::Tensor d = (x.to(at::kDouble) - y.to(at::kDouble)).abs();
      const double max_diff = d.max().item<double>();
      if (!(max_diff <= a.atol)) {  // NaN counts as a difference
        std::ostringstream line;
        line << "differ: " << t.name << ": max |a-b| " << max_diff << " > atol " << a.atol;
        report(line.str());
      }
    }
  }
  for (const auto& t : right.info().tensors)
    if (!left.info().find(t.name)) report("only in B: " + t.name);
  if (differences) {
    std::cout << differences << " difference(s) between step " << left.info().step << " ("
              << left.info().path << ") and step " << right.info().step << " ("
              << right.info().path << ")\n";
    return 1;
  }
  std::cout << "same: " << left.info().tensors.size() << " tensors"
            << (a.atol > 0 ? " within atol" : " bit-identical") << "\n";
  return 0;
}

int run_export(const Args& a) {
  want_positional(a, 1, "export");
  if (a.format != "safetensors" && a.format != "hf")
    throw UsageError("--format " + a.format + " is unknown; accepted: safetensors|hf");
  if (a.out.empty())
    throw UsageError(a.format == "hf" ? "export --format hf needs -o DIR" : "export needs -o OUT.safetensors");
  if (a.max_shard_bytes <= 0) throw UsageError("--max-shard-size must be positive");
  CheckpointReader reader(a.positional[0]);
  if (a.format == "hf") {
    if (a.with_optimizer) throw UsageError("--with-optimizer: a Hugging Face model directory holds weights only");
    detail::HfExport options;
    options.max_shard_bytes = a.max_shard_bytes;
    for (const std::string& file : detail::export_hf_model(reader, a.out, options))
      std::cout << "wrote " << a.out << "/" << file << "\n";
    return 0;
  }
  export_safetensors(reader, a.out, !a.with_optimizer);
  std::cout << "wrote " << a.out << "\n";
  return 0;
}

int run_ckpt(const std::vector<std::string>& args, int*, char***) {
  if (args.empty()) throw UsageError("missing subcommand (ls, show, verify, diff, export)");
  const Args parsed = parse_ckpt_args(args);
  const std::string& sub = args[0];
  if (sub == "ls") return run_ls(parsed);
  if (sub == "show") return run_show(parsed);
  if (sub == "verify") return run_verify(parsed);
  if (sub == "diff") return run_diff(parsed);
  if (sub == "export") return run_export(parsed);
  throw UsageError("unknown subcommand '" + sub + "'");
}

}  // namespace

extern const Command kCkptCommand = {"ckpt", "inspect, verify, diff and export checkpoints",
                                     kUsage, run_ckpt};

}  // namespace mpiaccel::tool
