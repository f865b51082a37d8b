// ctest: links mpiaccel; timeout 60
// Config: defaults, every value type, get/set, overrides, to_ini round trip and
// the docs table. The error messages are in test_config_errors.cpp.
#define BOOST_TEST_MODULE config
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "core/error_identity.hpp"
#include "mpiaccel/config.hpp"
#include "test_paths.hpp"

using mpiaccel::Config;
using mpiaccel::ConfigError;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// A markdown cell: '|' would end the cell.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) out += (c == '|') ? std::string("\\|") : std::string(1, c);
  return out;
}

// The table docs/config.md must carry, generated from the schema.
std::string schema_table() {
  std::string out = "| section | key | type | default | accepted | help |\n|---|---|---|---|---|---|\n";
  for (const auto& k : mpiaccel::config_schema()) {
    std::string def = k.default_value.empty() ? "\"\"" : k.default_value;
    out += "| " + k.section + " | `" + k.key + "` | " + k.type + " | `" + cell(def) + "` | " +
           cell(k.accepted) + " | " + cell(k.help) + " |\n";
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(defaults_are_the_member_initialisers) {
  Config c = Config::parse("", "empty.ini");
  BOOST_TEST((c == Config{}));
  BOOST_TEST((c.distributed.strategy == mpiaccel::StrategyChoice::No));
  BOOST_TEST(c.distributed.timeout_s == 1800.0);
  BOOST_TEST(c.ddp.bucket_cap_mb == 25.0);
  BOOST_TEST(c.zero.stage == 2);
  BOOST_TEST((c.fsdp.sharding_strategy == mpiaccel::ShardingStrategy::FullShard));
  BOOST_TEST(c.optimizer.betas[0] == 0.9);
  BOOST_TEST(c.optimizer.betas[1] == 0.999);
  BOOST_TEST(c.train.data_dir == "");
  BOOST_TEST(c.checkpoint.resume == "none");
  // Comments and blank lines alone change nothing.
  BOOST_TEST((Config::parse("; comment\n# other\n\n   \n[ddp]\n", "c.ini") == Config{}));
}

BOOST_AUTO_TEST_CASE(schema_covers_every_section_in_order) {
  std::vector<std::string> sections;
  std::set<std::string> seen;
  for (const auto& k : mpiaccel::config_schema()) {
    if (sections.empty() || sections.back() != k.section) sections.push_back(k.section);
    BOOST_TEST(seen.insert(k.section + "." + k.key).second, "duplicate row " << k.key);
    BOOST_TEST(!k.help.empty());
    BOOST_TEST(!k.accepted.empty());
    // Every row reads its own default back.
    Config c;
    c.set(k.section + "." + k.key, k.default_value);
    BOOST_TEST((c == Config{}), k.section << "." << k.key);
  }
  std::vector<std::string> expected = {"launch", "distributed", "parallelism", "ddp", "fsdp", "zero", "optimizer",
                                       "scheduler", "train", "model", "checkpoint", "logging"};
  BOOST_TEST(sections == expected, boost::test_tools::per_element());
  BOOST_TEST(mpiaccel::config_schema().size() == 132u);  // 79 + [train] hdf5_inputs, hdf5_labels, tokenize_from + [checkpoint] async + [model] activation, init_from + 13 Llama keys + [logging] report_to, logging_dir + [train] split_batches and the 4 loader keys + [parallelism] dp_replicate_size, dp_shard_size, tp_size, tp_across_nodes, sequence_parallel + pp_size, pp_schedule, pp_virtual_stages, pp_microbatches, pp_layers + cp_size, cp_comm_strategy + [ddp] comm_hook, comm_wrapper and 7 powersgd_ keys + [fsdp], [zero] quantized_weights, quantized_gradients, secondary_partition_size
}

BOOST_AUTO_TEST_CASE(bool_spellings) {
  for (const char* yes : {"true", "yes", "on", "1", "TRUE", "Yes", "On"}) {
    Config c = Config::parse(std::string("[ddp]\nstatic_graph = ") + yes + "\n", "b.ini");
    BOOST_TEST(c.ddp.static_graph, yes);
  }
  for (const char* no : {"false", "no", "off", "0", "False", "NO", "OFF"}) {
    Config c = Config::parse(std::string("[fsdp]\nforward_prefetch = ") + no + "\n", "b.ini");
    BOOST_TEST(!c.fsdp.forward_prefetch, no);
  }
}

BOOST_AUTO_TEST_CASE(every_type_parses) {
  const std::string text =
      "[launch]\n"
      "num_processes = 16        ; int, inline comment\n"
      "mpirun_args = --mca btl tcp,self --map-by ppr:2:node\n"
      "[distributed]\n"
      "strategy = FSDP\n"           // choices match case-insensitively
      "timeout_s = 2.5e2\n"
      "seed = -0\n"
      "[optimizer]\n"
      "betas = 0.8,0.95\n"
      "lr = 3e-4\n"
      "[train]\n"
      "data_dir = /data/fortunes\n"
      "  batch_size = 4\n"         // indentation is not a continuation
      "[checkpoint]\n"
      "resume = latest\n"
      "[logging]\n"
      "trace = \"  spaced.json \"\n"
      "metrics_file = a;b.jsonl\n";  // ';' without whitespace before it is text
  Config c = Config::parse(text, "types.ini");
  BOOST_TEST(c.launch.num_processes == 16);
  BOOST_TEST(c.launch.mpirun_args == "--mca btl tcp,self --map-by ppr:2:node");
  BOOST_TEST((c.distributed.strategy == mpiaccel::StrategyChoice::Fsdp));
  BOOST_TEST(c.distributed.timeout_s == 250.0);
  BOOST_TEST(c.distributed.seed == 0);
  BOOST_TEST(c.optimizer.betas[0] == 0.8);
  BOOST_TEST(c.optimizer.betas[1] == 0.95);
  BOOST_TEST(c.optimizer.lr == 3e-4);
  BOOST_TEST(c.train.data_dir == "/data/fortunes");
  BOOST_TEST(c.train.batch_size == 4);
  BOOST_TEST(c.checkpoint.resume == "latest");
  BOOST_TEST(c.logging.trace == "  spaced.json ");
  BOOST_TEST(c.logging.metrics_file == "a;b.jsonl");
  // CRLF files and a UTF-8 byte-order mark read the same.
  Config crlf = Config::parse("\xEF\xBB\xBF[zero]\r\nstage = 3\r\n", "crlf.ini");
  BOOST_TEST(crlf.zero.stage == 3);
  // Python configparser's "key: value" is accepted like inih does.
  BOOST_TEST(Config::parse("[zero]\nstage: 1\n", "colon.ini").zero.stage == 1);
}

BOOST_AUTO_TEST_CASE(get_and_set_use_the_ini_text) {
  Config c;
  BOOST_TEST(c.get("ddp.bucket_cap_mb") == "25");
  BOOST_TEST(c.get("optimizer.betas") == "0.9, 0.999");
  BOOST_TEST(c.get("optimizer.lr") == "0.001");
  BOOST_TEST(c.get("optimizer.eps") == "1e-08");
  BOOST_TEST(c.get("ddp.static_graph") == "false");
  BOOST_TEST(c.get("fsdp.min_num_params") == "100000000");
  BOOST_TEST(c.get("launch.mpirun_args") == "");
  c.set("ddp.bucket_cap_mb", "0.1");
  BOOST_TEST(c.ddp.bucket_cap_mb == 0.1);
  BOOST_TEST(c.get("ddp.bucket_cap_mb") == "0.1");
  c.set("logging.trace", "  x  ");  // unquoted set keeps what INI keeps: trimmed
  BOOST_TEST(c.logging.trace == "x");
  c.set("logging.trace", "\"  x  \"");
  BOOST_TEST(c.logging.trace == "  x  ");
  BOOST_TEST(c.get("logging.trace") == "\"  x  \"");
  c.set("train.data_dir", "\"\"");
  BOOST_TEST(c.train.data_dir == "");
}

BOOST_AUTO_TEST_CASE(overrides_apply_after_the_file_in_order) {
  Config c = Config::parse("[ddp]\nbucket_cap_mb = 10\n[zero]\nstage = 1\n", "o.ini",
                           {"ddp.bucket_cap_mb=4", "zero.stage = 3", "zero.stage=0",
                            "launch.mpirun_args=--bind-to core --map-by=node"});
  BOOST_TEST(c.ddp.bucket_cap_mb == 4.0);
  BOOST_TEST(c.zero.stage == 0);
  BOOST_TEST(c.launch.mpirun_args == "--bind-to core --map-by=node");
  Config d = Config::defaults({"distributed.strategy=zero", "optimizer.betas=0.5, 0.6"});
  BOOST_TEST((d.distributed.strategy == mpiaccel::StrategyChoice::Zero));
  BOOST_TEST(d.optimizer.betas[1] == 0.6);
}

BOOST_AUTO_TEST_CASE(to_ini_round_trips_defaults) {
  Config c;
  std::string ini = c.to_ini();
  BOOST_TEST((Config::parse(ini, "round.ini") == c));
  BOOST_TEST(ini.find("[launch]\n") != std::string::npos);
  BOOST_TEST(ini.find("; gradient bucket size in MiB (accepted: > 0; default: 25)\nbucket_cap_mb = 25\n") !=
             std::string::npos);
  BOOST_TEST(ini.find("(accepted: no|ddp|fsdp|zero; default: no)\nstrategy = no\n") != std::string::npos);
  BOOST_TEST(ini.find("default: \"\")\nmpirun_args =\n") != std::string::npos);
  // Every line fits inih's buffer.
  std::istringstream lines(ini);
  for (std::string line; std::getline(lines, line);) BOOST_TEST(line.size() <= 199u, line);
}

BOOST_AUTO_TEST_CASE(to_ini_round_trips_non_defaults) {
  Config c;
  c.launch.num_machines = 2;
  c.launch.num_processes = 8;
  c.launch.launcher = mpiaccel::LauncherChoice::Srun;
  c.launch.mpirun_args = "--mca btl ^openib;x";
  c.launch.srun_args = "\"quoted\"";
  c.distributed.strategy = mpiaccel::StrategyChoice::Fsdp;
  c.distributed.mixed_precision = mpiaccel::MixedPrecision::Bf16;
  c.distributed.timeout_s = 0.1 + 0.2;  // not a short decimal: tests exact float text
  c.distributed.seed = 1234567890123LL;
  c.distributed.allow_gpu_sharing = true;
  c.ddp.bucket_cap_mb = 1.0 / 3.0;
  c.ddp.find_unused_parameters = true;
  c.fsdp.sharding_strategy = mpiaccel::ShardingStrategy::HybridShard;
  c.fsdp.transformer_layer_cls_to_wrap = "Block,DecoderLayer";
  c.fsdp.reshard_after_forward = false;
  c.zero.stage = 3;
  c.zero.offload_optimizer = mpiaccel::OffloadChoice::Cpu;
  c.optimizer.name = mpiaccel::OptimizerChoice::Sgd;
  c.optimizer.betas = {0.85, 0.9999};
  c.optimizer.lr = 6e-4;
  c.optimizer.momentum = 0.9;
  c.scheduler.name = mpiaccel::LrSchedule::Cosine;
  c.scheduler.min_lr_ratio = 0.1;
  c.train.dataset = mpiaccel::DatasetChoice::FashionMnist;
  c.train.data_dir = " /path with spaces/ ";
  c.train.val_fraction = 1e-300;
  c.train.drop_last = false;
  c.model.dropout = 0.125;
  c.checkpoint.dir = ";starts-with-semicolon";
  c.checkpoint.resume = "/ckpt/step_00000100.h5";
  c.logging.level = mpiaccel::LogLevel::Debug;
  c.logging.metrics_file = "";
  c.logging.trace = "trace.json";
  Config back = Config::parse(c.to_ini(), "round.ini");
  BOOST_TEST((back == c));
  BOOST_TEST(back.train.data_dir == " /path with spaces/ ");
  BOOST_TEST(back.checkpoint.dir == ";starts-with-semicolon");
  BOOST_TEST(back.launch.srun_args == "\"quoted\"");
  BOOST_TEST(back.distributed.timeout_s == 0.1 + 0.2);
  BOOST_TEST(back.ddp.bucket_cap_mb == 1.0 / 3.0);
  BOOST_TEST(back.train.val_fraction == 1e-300);
  // == looks at every key: one changed key makes them differ.
  back.model.mlp_layers += 1;
  BOOST_TEST((back != c));
}

BOOST_AUTO_TEST_CASE(load_file_reads_and_names_the_path) {
  const std::string path = std::string(MPIACCEL_BINARY_DIR) + "/test_config_load.ini";
  {
    std::ofstream out(path);
    out << "[train]\nbatch_size = 32\n";
  }
  Config c = Config::load_file(path, {"train.max_steps=7"});
  BOOST_TEST(c.train.batch_size == 32);
  BOOST_TEST(c.train.max_steps == 7);
  {
    std::ofstream out(path);
    out << "[train]\nbatch_size = 0\n";
  }
  try {
    Config::load_file(path);
    BOOST_FAIL("no error");
  } catch (const ConfigError& e) {
    BOOST_TEST(e.message() == path + ":2: [train] batch_size: 0 is out of range; accepted: >= 1");
  }
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_CASE(error_what_carries_rank_host_and_source) {
  mpiaccel::detail::set_error_identity(3, "node17");
  try {
    Config::parse("[zero]\nstage = 4\n", "w.ini");
    BOOST_FAIL("no error");
  } catch (const mpiaccel::Error& e) {
    const std::string what = e.what();
    BOOST_TEST(e.rank() == 3);
    BOOST_TEST(e.host() == "node17");
    BOOST_TEST(what.rfind(e.message() + " [rank 3 node17, ini_parse.cpp:", 0) == 0, what);
    BOOST_TEST(what.back() == ']');
  }
  mpiaccel::detail::set_error_identity(-1, "node17");
  try {
    MPIACCEL_CHECK(false, "line one\nline two");
  } catch (const mpiaccel::Error& e) {
    BOOST_TEST(e.what() == std::string("line one line two [node17, test_config.cpp:") +
                               std::to_string(e.line()) + "]");
    BOOST_TEST(e.message() == "line one\nline two");
  }
}

BOOST_AUTO_TEST_CASE(docs_list_every_key) {
  const std::string path = std::string(MPIACCEL_SOURCE_DIR) + "/docs/config.md";
  const std::string begin = "<!-- schema-table:begin (generated by tests/unit/test_config.cpp) -->\n";
  const std::string end = "<!-- schema-table:end -->";
  std::string doc = read_text(path);
  size_t b = doc.find(begin), e = doc.find(end);
  // MPIACCEL_UPDATE_DOCS=1 rewrites the table after a schema change.
  if (std::getenv("MPIACCEL_UPDATE_DOCS") != nullptr && b != std::string::npos && e != std::string::npos) {
    doc = doc.substr(0, b + begin.size()) + schema_table() + doc.substr(e);
    std::ofstream(path) << doc;
    e = doc.find(end);
  }
  BOOST_REQUIRE_MESSAGE(b != std::string::npos && e != std::string::npos,
                        path << " lacks the schema-table markers");
  BOOST_TEST(doc.substr(b + begin.size(), e - b - begin.size()) == schema_table(),
             "docs/config.md is out of date: run MPIACCEL_UPDATE_DOCS=1 unit_test_config");
  for (const auto& k : mpiaccel::config_schema()) {
    BOOST_TEST(doc.find("`" + k.key + "`") != std::string::npos, k.key);
  }
}
