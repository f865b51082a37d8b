// `mpiaccel generate --checkpoint PATH --prompt TEXT ...`: text from the GPT
// or Llama of any checkpoint, at any world size, under any strategy (the checkpoint's
// own config, with the command line's overrides on top: e.g.
// distributed.strategy=fsdp under mpirun -np 4).

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "command.hpp"
#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/checkpoint.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/model_family.hpp"
#include "mpiaccel/parallelize.hpp"
#include "mpiaccel/program.hpp"
#include "trainer/builtin_model.hpp"
#include "optim/optimizer_factory.hpp"

namespace mpiaccel::tool {
namespace {

struct GenerateArgs {
  std::string checkpoint, model, prompt = "\n", logits;
  bool ids = false;  // print the new token ids instead of text
  GenerateOptions options;
  std::vector<std::string> overrides;
};

GenerateArgs parse_generate_args(const std::vector<std::string>& args) {
  GenerateArgs g;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw UsageError(arg + " needs a value");
      return args[++i];
    };
    try {
      if (arg == "--checkpoint") g.checkpoint = value();
      else if (arg == "--model") g.model = value();
      else if (arg == "--prompt") g.prompt = value();
      else if (arg == "--max-new") g.options.n_tokens = std::stoll(value());
      else if (arg == "--greedy") g.options.temperature = 0;
      else if (arg == "--temperature") g.options.temperature = std::stod(value());
      else if (arg == "--top-k") g.options.top_k = std::stoll(value());
      else if (arg == "--seed") g.options.seed = std::stoull(value());
      else if (arg == "--logits") g.logits = value();
      else if (arg == "--ids") g.ids = true;
      else if (arg.find('=') != std::string::npos && arg[0] != '-') g.overrides.push_back(arg);
      else throw UsageError("unknown argument '" + arg + "'");
    } catch (const std::logic_error&) {
      throw UsageError("bad number after " + arg);
    }
  }
  if (g.checkpoint.empty() == g.model.empty())
    throw UsageError("give one of --checkpoint PATH (a checkpoint) and --model DIR (a Hugging Face model)");
  if (g.options.n_tokens < 0) throw UsageError("--max-new must be >= 0");
  return g;
}

// The logits of every prompt position, [T, vocab] float32, as a .npy file
// (numpy.load reads it).
void write_npy(const std::string& path, const at::Tensor& logits) {
  const at::Tensor t = logits.to(at::kCPU, at::kFloat).contiguous();
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(t.size(0)) + ", " + std::to_string(t.size(1)) + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  MPIACCEL_CHECK(file.good(), "cannot create " + path);
  const unsigned short length = static_cast<unsigned short>(header.size());
  file.write("\x93NUMPY\x01\x00", 8);
  file.put(static_cast<char>(length & 0xff));
  file.put(static_cast<char>(length >> 8));
  file << header;
  file.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.numel() * 4));
  MPIACCEL_CHECK(file.good(), "writing " + path + " failed");
}

// The bytes of `prompt` as token ids (--logits and --ids read prompts so).
std::vector<int64_t> prompt_bytes(const std::string& prompt) {
  std::vector<int64_t> ids;
  for (unsigned char c : prompt) ids.push_back(c);
  return ids;
}

int generate_from(Accelerator& acc, const GenerateArgs& g) {
  const std::string& kind = acc.config().train.model;
  MPIACCEL_CHECK(model_family(kind).input == ModelFamily::Input::Tokens,
                 g.checkpoint + " holds a " + kind + ", which classifies images: nothing to generate with");
  // A Hugging Face model (--model) comes in through [model] init_from.
  std::shared_ptr<Model> model = detail::build_builtin_model(acc);
  // Split as in training, but never into pipeline stages: generation runs
  // the whole model on each rank.
  ParallelPlan plan = bundled_plan(*model, acc.config());
  plan.pipeline = nullptr;
  parallelize(acc, as_module(model), plan,
              [&acc](torch::nn::Module& kept) { return detail::make_optimizer(acc.config().optimizer, kept); });
  if (!g.checkpoint.empty()) acc.load_state(g.checkpoint);
  if (!g.logits.empty()) {
    // Through the model as generate() runs it (collective under FSDP).
    at::NoGradGuard no_grad;
    model->module().eval();
    const at::Tensor tokens = at::tensor(prompt_bytes(g.prompt), at::kLong).unsqueeze(0).to(at::Device(acc.device()));
    const at::Tensor logits = whole_logits(*model, tokens).squeeze(0);
    if (acc.is_main_process()) write_npy(g.logits, logits);
  }
  if (g.ids) {
    // The prompt's bytes as ids, the new ids printed as numbers.
    std::string line;
    for (int64_t id : generate_tokens(*model, prompt_bytes(g.prompt), g.options)) line += (line.empty() ? "" : " ") + std::to_string(id);
    if (acc.is_main_process()) std::cout << line << std::endl;
    return 0;
  }
  const std::string text = detail::continue_text(acc, *model, g.prompt, g.options);
  if (acc.is_main_process()) {
    std::cout << g.prompt << text << std::endl;
  }
  return 0;
}

int run_generate(const std::vector<std::string>& args, int* argc, char*** argv) {
  const GenerateArgs g = parse_generate_args(args);
  MainOptions options;
  options.name = "mpiaccel: generate";
  options.usage = "(see `mpiaccel generate --help`)\n";
  // The checkpoint's own config, read here (one small dataset; every rank
  // reads it); nothing is trained, so nothing resumes, saves or starts from
  // a pretrained model. A Hugging Face model's config is its config.json
  // (run_main takes it through [model] init_from, as `train` does).
  std::vector<std::string> words = {(*argv)[0], "checkpoint.resume=none"};
  if (g.model.empty()) {
    options.config_text = CheckpointReader(g.checkpoint).info().config_text;
    words.push_back("model.init_from=");
  } else {
    words.push_back("model.init_from=" + g.model);
    options.read_default_config = false;  // the directory's config.json is the model's config
  }
  words.insert(words.end(), g.overrides.begin(), g.overrides.end());
  std::vector<char*> program_argv;
  for (std::string& w : words) program_argv.push_back(w.data());
  program_argv.push_back(nullptr);
  return run_main(static_cast<int>(words.size()), program_argv.data(),
                  [&g](Accelerator& acc) { return generate_from(acc, g); }, options);
}

}  // namespace

extern const Command kGenerateCommand = {
    "generate", "text from the GPT or Llama of a checkpoint or a Hugging Face directory",
    "usage: [mpirun -np N] mpiaccel generate (--checkpoint PATH | --model DIR) [--prompt TEXT] [--max-new N]\n"
    "                         [--greedy | --temperature T] [--top-k K] [--seed S]\n"
    "                         [--logits FILE.npy] [--ids] [section.key=value ...]\n\n"
    "Continues TEXT (default: a newline) with N new tokens (default 200) from the GPT or\n"
    "Llama of the checkpoint PATH (a file, or a directory's latest), saved at any world size by\n"
    "any strategy; it runs under the checkpoint's own config, with the overrides on top\n"
    "(distributed.strategy=fsdp, ...), alone or under mpirun/srun. --model DIR takes a\n"
    "Hugging Face GPT2LMHeadModel or LlamaForCausalLM directory instead, built from its\n"
    "config.json alone, as `train` builds [model] init_from. Bytes, or through the\n"
    "tokenizer beside the token files of a BPE run. --greedy takes the most likely token\n"
    "each time; else sampling at --temperature (0.8) among the --top-k (40) most likely,\n"
    "seeded by --seed (1234): the same text every time. --logits writes the logits of\n"
    "every position of the (byte) prompt, [T, vocab] float32, as a .npy file. Rank 0\n"
    "prints the prompt and its continuation; with --ids, the bytes of TEXT are the\n"
    "prompt's ids and rank 0 prints only the new ids, as numbers.\n",
    run_generate};

}  // namespace mpiaccel::tool
