// ctest: links mpiaccel; np 2 3 4; timeout 300
// Memory-efficient init ([fsdp] cpu_ram_efficient_loading): ranks >= 1 build
// the GPT deferred (ModelInit::deferred) and FSDP's prepare streams rank 0's
// shards to them. Checked: (1) the peak RSS increase of every rank >= 1 over
// model construction + prepare stays within its shard + the root + one unit +
// slack, well under the model (the figures are printed); (2) shards after
// prepare, losses and shards after training are bit-equal to a full build on
// every rank, for several FSDP settings; (3) a deferred rank 0 and a model
// that differs across ranks fail on every rank with a clear message.
#define BOOST_TEST_MODULE memory_efficient_init
#include "support/mpi_test.hpp"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>

#include "fsdp/fsdp_strategy.hpp"
#include "state/model_sync.hpp"
#include "support/equivalence.hpp"
#include "support/small_models.hpp"

using namespace mpiaccel;
using namespace mpiaccel::test;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// A field of /proc/self/status in bytes ("VmHWM", "VmRSS").
int64_t status_bytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) {
      std::istringstream fields(line.substr(field.size() + 1));
      int64_t kib = 0;
      fields >> kib;
      return kib * 1024;
    }
  MPIACCEL_THROW("no " + field + " in /proc/self/status");
}

// Starts a new peak: VmHWM becomes the current RSS (Linux >= 4.0).
void reset_peak_rss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  MPIACCEL_CHECK(clear.good(), "cannot write /proc/self/clear_refs to reset VmHWM");
}

int64_t bytes_of(const at::Tensor& t) { return t.numel() * t.element_size(); }

mpiaccel::detail::FsdpEngine& engine_of(Strategy& strategy) {
  return dynamic_cast<mpiaccel::detail::FsdpStrategy&>(strategy).engine();
}

// A GPT big enough for the figures to stand out from the process's noise:
// 6 layers of width 384, about 10.8 M parameters (41 MiB in fp32).
ModelSpec big_spec() {
  ModelSpec spec;
  spec.n_layer = 6;
  spec.n_head = 6;
  spec.n_embd = 384;
  spec.block_size = 64;
  return spec;
}

struct Prepared {
  std::shared_ptr<Model> model;
  std::shared_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<Strategy> strategy;
};

// Builds `kind` (rank 0 from seed 7; the other ranks deferred, or in full
// from other seeds so prepare must overwrite them) and prepares FSDP.
Prepared prepare(const std::string& kind, const ModelSpec& spec, const FsdpConfig& config,
                 bool deferred, const std::string& optimizer = "sgd") {
  const int rank = world().rank();
  Prepared out;
  torch::manual_seed(rank == 0 ? 7 : 1000 + rank);
  ModelInit init;
  init.deferred = deferred && rank != 0;
  out.model = make_model(kind, spec, init);
  out.optimizer = optimizer == "sgd" ? one_group("sgd")(out.model->module())
                                     : decay_groups(optimizer)(out.model->module());
  out.strategy = make_fsdp_strategy(config, world_ptr());
  out.strategy->prepare(as_module(out.model), out.optimizer);
  return out;
}

// Every unit's shard block on this rank, bit for bit.
bool same_shards(Strategy& a, Strategy& b) {
  auto& ua = engine_of(a).units();
  auto& ub = engine_of(b).units();
  bool same = ua.size() == ub.size();
  for (size_t k = 0; same && k < ua.size(); ++k) same = torch::equal(ua[k].local, ub[k].local);
  return same;
}

// Trains both for `steps` steps on the same batches; true when every loss is
// bit-equal.
bool same_training(const std::string& kind, Prepared& a, Prepared& b, int steps) {
  const int n = world().size(), rank = world().rank();
  const int64_t rows = 2;
  bool same = true;
  for (int step = 0; step < steps; ++step) {
    auto [x, y] = bundled_batch(kind, step, rows * n);
    double losses[2];
    Prepared* runs[2] = {&a, &b};
    for (int i = 0; i < 2; ++i) {
      Prepared& run = *runs[i];
      run.strategy->zero_grad(*run.optimizer);
      auto loss = run.model->loss(run.model->forward(x.narrow(0, rank * rows, rows)),
                                  y.narrow(0, rank * rows, rows));
      loss.backward();
      run.strategy->after_backward();
      run.strategy->step(*run.optimizer);
      losses[i] = loss.item<double>();
    }
    same = same && losses[0] == losses[1];
  }
  return same;
}

void expect_identical(const std::string& what, const std::string& kind, const FsdpConfig& config,
                      const std::string& optimizer = "sgd") {
  at::set_num_threads(1);
  const ModelSpec spec = small_spec(kind);
  Prepared full = prepare(kind, spec, config, /*deferred=*/false, optimizer);
  Prepared deferred = prepare(kind, spec, config, /*deferred=*/true, optimizer);
  const bool shards_after_prepare = same_shards(*full.strategy, *deferred.strategy);
  const bool losses = same_training(kind, full, deferred, 3);
  const bool shards_after_training = same_shards(*full.strategy, *deferred.strategy);
  BOOST_TEST_MESSAGE(what << ": np " << world().size() << ": shards after prepare "
                          << shards_after_prepare << ", losses " << losses
                          << ", shards after 3 steps " << shards_after_training);
  MPIACCEL_CHECK_ALL(shards_after_prepare);
  MPIACCEL_CHECK_ALL(losses);
  MPIACCEL_CHECK_ALL(shards_after_training);
}

std::string caught(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_CASE(deferred_model_holds_no_memory) {
  ModelInit init;
  init.deferred = true;
  auto deferred = make_model("gpt", big_spec(), init);
  auto full = make_model("gpt", small_spec("gpt"));
  const bool lacks = has_deferred_parameters(deferred->module());
  const bool full_has = !has_deferred_parameters(full->module());
  int64_t held = 0;
  for (const auto& p : deferred->module().parameters()) held += p.storage().nbytes();
  // Same names, shapes and dtypes as a full build: the cross-rank check passes.
  const bool same_fingerprint = model_fingerprint(deferred->module()) ==
                                model_fingerprint(make_model("gpt", big_spec())->module());
  MPIACCEL_CHECK_ALL(lacks);
  MPIACCEL_CHECK_ALL(full_has);
  MPIACCEL_CHECK_ALL(held == 0);
  MPIACCEL_CHECK_ALL(same_fingerprint);
}

BOOST_AUTO_TEST_CASE(peak_rss_of_ranks_after_the_first_is_about_their_shard) {
  require_world_size(2);
  at::set_num_threads(1);
  const int n = world().size(), rank = world().rank();
  const FsdpConfig config = fsdp_config("TRANSFORMER_BASED_WRAP", "DecoderLayer");
  // Warm-up: LibTorch's and MPI's lazily built state (thread pools, shared
  // memory segments) is not what is measured.
  {
    Prepared warm = prepare("gpt", small_spec("gpt"), config, /*deferred=*/true);
    auto [x, y] = bundled_batch("gpt", 0, 2);
    warm.model->loss(warm.model->forward(x), y).backward();
    warm.strategy->after_backward();
  }
  world().barrier();

  reset_peak_rss();
  const int64_t before = status_bytes("VmRSS");
  Prepared run = prepare("gpt", big_spec(), config, /*deferred=*/true);
  const int64_t increase = status_bytes("VmHWM") - before;

  // The same with every rank building in full, for comparison (printed).
  reset_peak_rss();
  const int64_t before_full = status_bytes("VmRSS");
  { Prepared full = prepare("gpt", big_spec(), config, /*deferred=*/false); }
  const int64_t full_increase = status_bytes("VmHWM") - before_full;

  int64_t model_bytes = 0, shard_bytes = 0, root_bytes = 0, largest_unit = 0;
  for (const auto& p : run.model->module().parameters()) model_bytes += bytes_of(p);
  for (const mpiaccel::detail::FsdpUnit& u : engine_of(*run.strategy).units()) {
    shard_bytes += bytes_of(u.local);
    if (u.module) largest_unit = std::max(largest_unit, u.full_bytes);
    else root_bytes = u.full_bytes;
  }
  // The streaming buffer is one block (a unit / n); LibTorch and the
  // allocator (one module built and freed at a time) add a few MiB. A unit
  // buffer may be held twice at the peak: an op runs on the communication
  // thread or on the thread waiting for it, whichever gets there first, and
  // glibc keeps a freed buffer in the arena of the thread that allocated it,
  // so the next one, allocated by the other thread, cannot reuse it (seen:
  // 24 or 38 MiB on rank 1 from run to run, the difference two units).
  constexpr int64_t kSlack = int64_t{8} << 20;
  const int64_t bound = shard_bytes + root_bytes + 2 * largest_unit + kSlack;

  std::ostringstream line;
  line.precision(1);
  line << std::fixed << increase / kMiB << " MiB (full build: " << full_increase / kMiB << ")";
  const std::vector<std::string> all = world().all_gather_bytes(line.str());
  if (rank == 0) {
    std::ostringstream report;
    report.precision(1);
    report << std::fixed << "memory-efficient init, GPT " << big_spec().n_layer << "x"
           << big_spec().n_embd << ", np " << n << ": model " << model_bytes / kMiB
           << " MiB, shard " << shard_bytes / kMiB << " MiB (+ root " << root_bytes / kMiB
           << " MiB, largest unit " << largest_unit / kMiB << " MiB); peak RSS increase over "
           << "build + prepare, deferred on ranks >= 1 (every rank building in full):";
    for (int r = 0; r < n; ++r) report << " rank " << r << " " << all[r] << (r + 1 < n ? "," : "");
    std::cout << report.str() << std::endl;
    BOOST_TEST_MESSAGE(report.str());
  }
  if (rank != 0) {
    BOOST_TEST_MESSAGE("rank " << rank << ": increase " << increase / kMiB << " MiB, bound "
                               << bound / kMiB << " MiB");
  }
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer's shadow memory, redzones and quarantine of freed
  // blocks make RSS measure the sanitizer (make test-sanitize): the deferred
  // build above ran under it; the bounds are checked by the plain build.
  BOOST_TEST_MESSAGE("AddressSanitizer build: the RSS bounds are not checked");
  return;
#endif
  MPIACCEL_CHECK_ALL(rank == 0 || increase <= bound);
  MPIACCEL_CHECK_ALL(rank == 0 || increase < model_bytes);
  // From 3 ranks on, a shard + one unit is well under the model.
  MPIACCEL_CHECK_ALL(rank == 0 || n < 3 || increase < model_bytes * 3 / 4);
  MPIACCEL_CHECK_ALL(rank == 0 || increase < full_increase);
  // Rank 0 did build the whole model.
  MPIACCEL_CHECK_ALL(rank != 0 || increase >= model_bytes * 9 / 10);
}

BOOST_AUTO_TEST_CASE(bit_identical_to_a_full_build) {
  require_world_size(2);
  expect_identical("gpt DecoderLayer units", "gpt", fsdp_config("TRANSFORMER_BASED_WRAP", "DecoderLayer"));
  FsdpConfig keep = fsdp_config("TRANSFORMER_BASED_WRAP", "DecoderLayer");
  keep.sharding_strategy = ShardingStrategy::ShardGradOp;
  expect_identical("gpt SHARD_GRAD_OP", "gpt", keep);
  expect_identical("gpt NO_WRAP", "gpt", fsdp_config("NO_WRAP"));
  expect_identical("mlp MlpBlock units, adamw", "mlp", fsdp_config("TRANSFORMER_BASED_WRAP", "MlpBlock"),
                   "adamw");
  FsdpConfig offload = fsdp_config("TRANSFORMER_BASED_WRAP", "DecoderLayer");
  offload.cpu_offload = true;
  expect_identical("gpt cpu_offload", "gpt", offload);
  if (world().size() == 4) {
    FsdpConfig hybrid = fsdp_config("TRANSFORMER_BASED_WRAP", "DecoderLayer");
    hybrid.sharding_strategy = ShardingStrategy::HybridShard;
    hybrid.hybrid_group_size = 2;
    expect_identical("gpt HYBRID_SHARD 2x2", "gpt", hybrid);
  }
}

BOOST_AUTO_TEST_CASE(deferred_rank_0_fails_everywhere) {
  require_world_size(2);
  const std::string message = caught([] {
    ModelInit init;
    init.deferred = true;  // rank 0 too: nobody has the values
    auto model = make_model("gpt", small_spec("gpt"), init);
    auto optimizer = one_group("sgd")(model->module());
    auto strategy = make_fsdp_strategy(fsdp_config("TRANSFORMER_BASED_WRAP", "DecoderLayer"), world_ptr());
    strategy->prepare(as_module(model), optimizer);
  });
  BOOST_TEST_MESSAGE("deferred rank 0: " << message);
  MPIACCEL_CHECK_ALL(message.find("rank 0 must build the model in full") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(different_model_fails_as_before) {
  require_world_size(2);
  const std::string message = caught([] {
    ModelSpec spec = small_spec("gpt");
    if (world().rank() == 1) spec.n_embd = 64;
    ModelInit init;
    init.deferred = world().rank() != 0;
    auto model = make_model("gpt", spec, init);
    auto optimizer = one_group("sgd")(model->module());
    auto strategy = make_fsdp_strategy(fsdp_config("TRANSFORMER_BASED_WRAP", "DecoderLayer"), world_ptr());
    strategy->prepare(as_module(model), optimizer);
  });
  BOOST_TEST_MESSAGE("different model: " << message);
  MPIACCEL_CHECK_ALL(message.find("model differs across ranks: rank 1: parameter wte.weight has shape [256, 64], rank 0 has [256, 32]") != std::string::npos);
}
