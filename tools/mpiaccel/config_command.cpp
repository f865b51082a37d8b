// `mpiaccel config [--defaults] [-o FILE] [section.key=value ...]`: the
// questions of `accelerate config`, answered on stdin, written as a commented
// INI (Config::to_ini). Accepted values and checks come from the config
// schema, so the wizard never accepts what `mpiaccel train` would refuse.

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "command.hpp"
#include "launch_plan.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/config_files.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/runtime.hpp"

namespace mpiaccel::tool {
namespace {

namespace fs = std::filesystem;

struct ConfigArguments {
  bool defaults = false;
  std::vector<std::string> from;  // --from FILE...: translate instead of asking
  std::string output;  // "" = the default file, "-" = stdout
  std::vector<std::string> overrides;
};

ConfigArguments parse_config_arguments(const std::vector<std::string>& args) {
  ConfigArguments out;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "--defaults") {
      out.defaults = true;
    } else if (a == "--from") {
      while (i + 1 < args.size() && args[i + 1][0] != '-' && args[i + 1].find('=') == std::string::npos) {
        out.from.push_back(args[++i]);
      }
      if (out.from.empty()) throw UsageError("--from needs one or more config files");
    } else if (a == "-o" || a == "--output") {
      if (i + 1 >= args.size()) throw UsageError(a + " needs a file");
      out.output = args[++i];
    } else if (a.rfind("--output=", 0) == 0) {
      out.output = a.substr(9);
    } else if (a.find('=') != std::string::npos && a[0] != '-') {
      out.overrides.push_back(a);
    } else {
      throw UsageError("unexpected argument '" + a + "'");
    }
  }
  return out;
}

const ConfigKeyInfo& schema_row(const std::string& dotted) {
  for (const auto& row : config_schema()) {
    if (row.section + "." + row.key == dotted) return row;
  }
  MPIACCEL_THROW("the config schema has no key '" + dotted + "'");
}

std::string trim(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  size_t end = text.find_last_not_of(" \t\r\n");
  return text.substr(begin, end - begin + 1);
}

// Asks one question per key; an answer goes through Config::set, so its
// validation and its message are the config file's.
class Wizard {
 public:
  Wizard(std::istream& in, std::ostream& out, Config& config, bool interactive)
      : in_(in), out_(out), config_(config), interactive_(interactive) {}

  /// Asks for `dotted` until the answer is valid; Enter keeps the value shown
  /// in brackets. `check` adds a rule across keys ("" = fine).
  void ask(const std::string& dotted, const std::string& question,
           const std::function<std::string()>& check = {}) {
    const auto& row = schema_row(dotted);
    const bool show_accepted = row.type == "choice" || row.type == "bool" || row.type == "int";
    std::string accepted = row.type == "bool" ? "yes|no" : row.accepted;
    for (;;) {
      std::string current = config_.get(dotted);
      if (row.type == "bool") current = current == "true" ? "yes" : "no";
      out_ << question << (show_accepted ? " (" + accepted + ")" : "") << " [" << current << "]: ";
      out_.flush();
      std::string line;
      if (!std::getline(in_, line)) {
        out_ << "\n";
        MPIACCEL_THROW("input ended before the question '" + question +
                       "' was answered; nothing was written (answer every question, or use --defaults)");
      }
      // Answers piped in are not echoed by a terminal: echo them, so the
      // transcript reads as a dialogue.
      if (!interactive_) out_ << line << "\n";
      std::string answer = trim(line);
      if (answer.empty()) answer = current;
      const Config before = config_;
      try {
        config_.set(dotted, answer);
      } catch (const ConfigError& e) {
        out_ << "  " << without_prefix(e.message()) << "\n";
        continue;
      }
      std::string problem = check ? check() : "";
      if (problem.empty()) return;
      config_ = before;
      out_ << "  " << problem << "\n";
    }
  }

 private:
  // Config::set's message starts with "set 'key=value': "; the question
  // already names the key.
  static std::string without_prefix(const std::string& message) {
    size_t colon = message.find("': ");
    return message.rfind("set '", 0) == 0 && colon != std::string::npos ? message.substr(colon + 3)
                                                                          : message;
  }

  std::istream& in_;
  std::ostream& out_;
  Config& config_;
  bool interactive_;
};

void ask_everything(Wizard& wizard, Config& config) {
  wizard.ask("launch.num_machines", "How many machines (nodes) will the job use?");
  wizard.ask("launch.num_processes", "How many processes (ranks) in total, all machines together?",
             [&] {
               return config.launch.num_processes >= config.launch.num_machines
                          ? std::string()
                          : "at least one process per machine: give >= " +
                                std::to_string(config.launch.num_machines);
             });
  wizard.ask("launch.cpus_per_process",
             "How many CPU cores per process? 0 = the node's cores shared among its ranks");
  wizard.ask("launch.launcher", "Which launcher? auto = srun inside a Slurm allocation, else mpirun");

  wizard.ask("distributed.strategy", "Which distribution strategy?");
  const StrategyChoice strategy = config.distributed.strategy;
  if (strategy == StrategyChoice::Ddp) {
    wizard.ask("ddp.bucket_cap_mb", "DDP gradient bucket size in MiB?");
    wizard.ask("ddp.find_unused_parameters", "Can some parameters get no gradient in a step?");
  } else if (strategy == StrategyChoice::Fsdp) {
    wizard.ask("fsdp.sharding_strategy", "FSDP: what is sharded?");
    wizard.ask("fsdp.auto_wrap_policy", "FSDP: how is the model split into units?");
    if (config.fsdp.auto_wrap_policy == WrapPolicy::TransformerBasedWrap) {
      wizard.ask("fsdp.transformer_layer_cls_to_wrap",
                 "FSDP: module class names of the units, comma-separated (empty: the bundled model's)?");
    } else if (config.fsdp.auto_wrap_policy == WrapPolicy::SizeBasedWrap) {
      wizard.ask("fsdp.min_num_params", "FSDP: parameters per unit at least?");
    }
    wizard.ask("fsdp.cpu_offload", "FSDP: keep sharded parameters and optimizer state on the CPU?");
    wizard.ask("fsdp.activation_checkpointing", "FSDP: recompute activations in backward?");
  } else if (strategy == StrategyChoice::Zero) {
    wizard.ask("zero.stage", "ZeRO stage? 1 = optimizer state, 2 = + gradients, 3 = + parameters");
    wizard.ask("zero.offload_optimizer", "ZeRO: where do optimizer state and step live?");
    if (config.zero.stage == 3) wizard.ask("zero.offload_param", "ZeRO-3: where do parameter shards live?");
  }
  wizard.ask("distributed.mixed_precision", "Mixed precision?");

  wizard.ask("checkpoint.dir", "Checkpoint directory?");
  wizard.ask("checkpoint.every_steps", "Save a checkpoint every how many steps? 0 = only at the end");
  wizard.ask("checkpoint.keep_last", "How many checkpoints to keep? 0 = all");
}

// Through a temporary file and a rename, so an interrupted write never
// leaves half a config where the old one was.
void write_file(const std::string& path, const std::string& text) {
  fs::path target(path);
  if (target.has_parent_path()) {
    std::error_code error;
    fs::create_directories(target.parent_path(), error);
    MPIACCEL_CHECK(!error, "cannot create the directory '" + target.parent_path().string() +
                               "': " + error.message());
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    MPIACCEL_CHECK(out.good(), "cannot write '" + tmp + "': " + std::strerror(errno));
    out << text;
    out.close();
    MPIACCEL_CHECK(!out.fail(), "cannot write '" + tmp + "' (disk full?)");
  }
  std::error_code error;
  fs::rename(tmp, target, error);
  MPIACCEL_CHECK(!error, "cannot rename '" + tmp + "' to '" + path + "': " + error.message());
}

// --from: the files' translation, with where each key came from.
int translate_files(const ConfigArguments& parsed) {
  const std::string text = describe_resolution(resolve_config_files(parsed.from, parsed.overrides));
  if (parsed.output.empty() || parsed.output == "-") {
    std::cout << text;
    return 0;
  }
  write_file(parsed.output, text);
  std::cout << "mpiaccel config: wrote " << parsed.output << "\n";
  return 0;
}

int run_config(const std::vector<std::string>& args, int*, char***) {
  auto parsed = parse_config_arguments(args);
  if (!parsed.from.empty()) return translate_files(parsed);
  std::string output = parsed.output;
  if (output.empty()) {
    output = default_config_path(process_environment());
    if (output.empty()) throw UsageError("neither XDG_CONFIG_HOME nor HOME is set: give -o FILE");
  }
  // Asking again about an existing file keeps what the wizard does not ask
  // about (optimizer, model, ...) and offers its answers as the defaults.
  // --defaults writes the defaults, whatever the file held.
  const bool existing = !parsed.defaults && output != "-" && fs::exists(output);
  Config config = existing ? Config::load_file(output, parsed.overrides) : Config::defaults(parsed.overrides);

  if (!parsed.defaults) {
    std::cout << "mpiaccel config: answer each question; Enter keeps the value in brackets"
              << (existing ? " (from " + output + ")" : "") << ".\n";
    Wizard wizard(std::cin, std::cout, config, isatty(STDIN_FILENO) != 0);
    ask_everything(wizard, config);
  }
  const std::string text = config.to_ini();
  if (output == "-") {
    std::cout << text;
    return 0;
  }
  write_file(output, text);
  std::cout << "mpiaccel config: wrote " << output << "\n"
            << "next: mpiaccel launch --config " << output << " -- mpiaccel train\n";
  return 0;
}

}  // namespace

extern const Command kConfigCommand = {
    "config", "ask how to run (machines, ranks, strategy, precision) and write a config",
    "usage: mpiaccel config [--defaults] [-o FILE] [section.key=value ...]\n"
    "       mpiaccel config --from FILE... [-o FILE] [section.key=value ...]\n\n"
    "Asks on stdin, like `accelerate config`: machines and processes, cores per process,\n"
    "launcher, strategy and its main options (DDP buckets, FSDP sharding and wrap policy,\n"
    "ZeRO stage and offload), mixed precision, checkpoint directory and cadence. Enter\n"
    "keeps the value in brackets; an answer that is not accepted is asked again, with the\n"
    "accepted values. Writes every key, commented (docs/config.md), to FILE.\n\n"
    "options:\n"
    "  -o FILE, --output FILE  where to write (default $XDG_CONFIG_HOME/mpiaccel/default.ini,\n"
    "                          ~/.config/mpiaccel/default.ini when XDG_CONFIG_HOME is unset,\n"
    "                          which `mpiaccel launch` reads when given no --config);\n"
    "                          '-' prints the file. An existing FILE gives the defaults\n"
    "                          and keeps the keys no question is about.\n"
    "  --defaults              write without asking\n"
    "  section.key=value       set a key before the questions (e.g. train.max_steps=500)\n\n"
    "  --from FILE...          translate config files instead of asking: INI, Accelerate\n"
    "                          YAML, DeepSpeed JSON, the Trainer's fsdp_config or\n"
    "                          TrainingArguments JSON, combined as `mpiaccel train` combines\n"
    "                          several --config; prints (or writes to -o FILE) an INI of every\n"
    "                          key they set, each under the file:line it came from, then\n"
    "                          the keys that were moot and why (docs/config.md)\n\n"
    "If input ends before the last answer, nothing is written (exit status 1).\n",
    run_config};

}  // namespace mpiaccel::tool
