// ctest: links mpiaccel; timeout 120
// estimate-memory's counts and formulas: the shape-only builds' parameter counts against the
// built models, the ZeRO paper's own worked example (Ψ = 7.5 B, N = 64,
// K = 12: 120 / 31.4 / 16.6 / 1.9 GB), fp32 model states, offload, FSDP's
// gathered and resident terms, and the activation terms.
#define BOOST_TEST_MODULE estimate
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "mpiaccel/error.hpp"
#include "mpiaccel/estimate.hpp"
#include "mpiaccel/models.hpp"
#include "support/scratch_dir.hpp"

using namespace mpiaccel;

namespace {

ModelSpec gpt(int64_t layers, int64_t embd, int64_t heads, int64_t block) {
  ModelSpec s;
  s.n_layer = layers;
  s.n_embd = embd;
  s.n_head = heads;
  s.block_size = block;
  return s;
}

void expect_counts_match(const std::string& kind, const ModelSpec& spec, const std::vector<std::string>& units) {
  const ModelFootprint closed = model_footprint(kind, spec);
  std::shared_ptr<Model> model = make_model(kind, spec);
  const ModelFootprint counted = count_footprint(*model, units);
  BOOST_TEST(closed.params == counted.params, kind);
  BOOST_TEST(closed.params == parameter_count(*model), kind);
  BOOST_TEST(closed.largest_unit_params == counted.largest_unit_params, kind);
  BOOST_TEST(closed.root_params == counted.root_params, kind);
  BOOST_TEST(closed.units == counted.units, kind);
  // The same parameters in the same order, so the shards round up alike.
  BOOST_TEST((closed.tensors == counted.tensors), kind);
  for (int n : {1, 2, 3, 4, 7}) BOOST_TEST(shard_elements(closed, n) == shard_elements(counted, n), kind);
}

// A model of exactly `psi` parameters, all inside units (no FSDP root).
ModelFootprint bare(int64_t psi) {
  ModelFootprint m;
  m.kind = "gpt";
  m.params = psi;
  m.units = 0;
  return m;
}

EstimateSettings on(int world, bool bucket_view = true) {
  EstimateSettings s;
  s.world_size = world;
  s.gradient_as_bucket_view = bucket_view;
  return s;
}

int64_t states(const MemoryEstimate& r) { return r.model_state_bytes(); }

}  // namespace

BOOST_AUTO_TEST_CASE(a_seventy_billion_parameter_llama_counts_without_its_memory) {
  // Llama-3-70B's config.json: transformers counts 70,553,706,496
  // parameters. The shape-only build holds none of their 282 GB.
  ModelSpec spec;
  spec.n_layer = 80;
  spec.n_embd = 8192;
  spec.n_head = 64;
  spec.n_kv_head = 8;
  spec.intermediate_size = 28672;
  spec.vocab_size = 128256;
  spec.block_size = 8192;
  const ModelFootprint whole = model_footprint("llama", spec);
  BOOST_TEST(whole.params == 70'553'706'496);
  BOOST_TEST(whole.units == 80);
  BOOST_TEST(whole.largest_unit_params == 855'654'400);
  BOOST_TEST(whole.root_params == 2 * 128256 * 8192 + 8192);
  // At tp 8 a rank holds 1/8 of all but the norms (8 key/value heads: one each).
  const ModelFootprint tp8 = model_footprint("llama", spec, 8);
  BOOST_TEST(tp8.params == (whole.params - (2 * 80 + 1) * 8192) / 8 + (2 * 80 + 1) * 8192);
}

BOOST_AUTO_TEST_CASE(closed_forms_equal_the_built_models) {
  expect_counts_match("gpt", gpt(4, 128, 4, 128), {"DecoderLayer"});
  expect_counts_match("gpt", gpt(1, 48, 3, 7), {"DecoderLayer"});
  ModelSpec llama = gpt(3, 64, 4, 16);
  llama.n_kv_head = 2;
  expect_counts_match("llama", llama, {"LlamaDecoderLayer"});
  llama.tie_word_embeddings = true;
  llama.attention_bias = true;
  llama.mlp_bias = true;
  llama.intermediate_size = 100;
  llama.head_dim = 8;
  expect_counts_match("llama", llama, {"LlamaDecoderLayer"});
  llama.rope_scaling = RopeScaling::Llama3;  // its frequencies compute even in a shape-only build
  expect_counts_match("llama", llama, {"LlamaDecoderLayer"});
  ModelSpec mlp;
  mlp.hidden_size = 100;
  mlp.mlp_layers = 3;
  expect_counts_match("mlp", mlp, {"MlpBlock"});
  mlp.hidden_size = 1000;  // now the later blocks (H² + H) outgrow the first (785·H)
  expect_counts_match("mlp", mlp, {"MlpBlock"});
  expect_counts_match("cnn", mlp, {});
  // GPT: V·C + T·C + L·(12C² + 13C) + 2C.
  const ModelFootprint f = model_footprint("gpt", gpt(4, 128, 4, 128));
  BOOST_TEST(f.params == 256 * 128 + 128 * 128 + 4 * (12 * 128 * 128 + 13 * 128) + 2 * 128);
  BOOST_CHECK_THROW(model_footprint("resnet", mlp), Error);
}

BOOST_AUTO_TEST_CASE(zero_paper_worked_example) {
  // SC'20 Fig. 1: Ψ = 7.5 B, N = 64, mixed-precision Adam (K = 12).
  const ModelFootprint m = bare(7'500'000'000);
  const ModelSpec spec = gpt(1, 64, 1, 1);
  const double gb = 1e9;
  const auto bf16 = [&](StrategyKind strategy) { return estimate_memory(m, spec, strategy, false, MixedPrecision::Bf16, on(64)); };
  BOOST_TEST(states(bf16(StrategyKind::Ddp)) / gb == 120.0, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(states(bf16(StrategyKind::Zero1)) / gb == 31.40625, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(states(bf16(StrategyKind::Zero2)) / gb == 16.640625, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(states(bf16(StrategyKind::Zero3)) / gb == 1.875, boost::test_tools::tolerance(1e-12));
  // The terms: params 2Ψ, grads 2Ψ, K = 4 (fp32 master) + 8 (Adam).
  const MemoryEstimate ddp = bf16(StrategyKind::Ddp);
  BOOST_TEST(ddp.param_bytes == 2 * m.params);
  BOOST_TEST(ddp.grad_bytes == 2 * m.params);
  BOOST_TEST(ddp.optimizer_bytes == 12 * m.params);
  // fp16 costs what bf16 does.
  BOOST_TEST(states(estimate_memory(m, spec, StrategyKind::Zero2, false, MixedPrecision::Fp16, on(64))) == states(bf16(StrategyKind::Zero2)));
}

BOOST_AUTO_TEST_CASE(fp32_model_states) {
  const int64_t psi = 1'000'000;
  const int n = 4;
  const ModelFootprint m = bare(psi);
  const ModelSpec spec = gpt(1, 64, 1, 1);
  const auto fp32 = [&](StrategyKind strategy) { return estimate_memory(m, spec, strategy, false, MixedPrecision::No, on(n)); };
  BOOST_TEST(states(fp32(StrategyKind::Ddp)) == 16 * psi);                   // 4 + 4 + 8
  BOOST_TEST(states(fp32(StrategyKind::Zero1)) == 8 * psi + 8 * psi / n);    // params, grads; Adam sharded
  BOOST_TEST(states(fp32(StrategyKind::Zero2)) == 4 * psi + 12 * psi / n);
  BOOST_TEST(states(fp32(StrategyKind::Fsdp)) == 16 * psi / n);
  BOOST_TEST(fp32(StrategyKind::Fsdp).precision == "fp32");
  // DDP's flat buckets are a second copy of the gradients unless they are the .grad.
  BOOST_TEST(estimate_memory(m, spec, StrategyKind::Ddp, false, MixedPrecision::No, on(n, false)).grad_bytes == 8 * psi);
  // SGD without momentum has no state; with momentum one slot.
  EstimateSettings sgd = on(n);
  sgd.optimizer_slots = 0;
  BOOST_TEST(estimate_memory(m, spec, StrategyKind::Ddp, false, MixedPrecision::No, sgd).optimizer_bytes == 0);
  BOOST_TEST(estimate_memory(m, spec, StrategyKind::Ddp, false, MixedPrecision::Bf16, sgd).optimizer_bytes == 4 * psi);  // master only
  OptimizerConfig opt;
  opt.name = OptimizerChoice::Sgd;
  opt.momentum = 0.9;
  BOOST_TEST(optimizer_slots(opt) == 1);
  opt.name = OptimizerChoice::AdamW;
  BOOST_TEST(optimizer_slots(opt) == 2);
  BOOST_CHECK_THROW(estimate_memory(m, spec, StrategyKind::Ddp, true, MixedPrecision::No, on(n)), Error);
}

BOOST_AUTO_TEST_CASE(fsdp_resident_root_gathered_units_and_offload) {
  const ModelSpec spec = gpt(4, 128, 4, 128);
  const ModelFootprint m = model_footprint("gpt", spec);
  const int n = 3;  // uneven shards round up, parameter by parameter
  const MemoryEstimate fsdp = estimate_memory(m, spec, StrategyKind::Fsdp, false, MixedPrecision::No, on(n));
  BOOST_TEST(fsdp.param_bytes == shard_elements(m, n) * 4 + 4 * m.root_params);
  BOOST_TEST(fsdp.grad_bytes == shard_elements(m, n) * 4);
  BOOST_TEST(fsdp.optimizer_bytes == shard_elements(m, n) * 8);
  BOOST_TEST(fsdp.gathered_bytes == 2 * 4 * m.largest_unit_params);  // running + prefetched
  // SHARD_GRAD_OP (no reshard after forward): every unit is gathered at the
  // end of forward; the states between steps are FULL_SHARD's.
  EstimateSettings keep = on(n);
  keep.reshard_after_forward = false;
  const MemoryEstimate grad_op = estimate_memory(m, spec, StrategyKind::Fsdp, false, MixedPrecision::No, keep);
  BOOST_TEST(grad_op.gathered_bytes == 4 * (m.params - m.root_params));
  BOOST_TEST(grad_op.model_state_bytes() == fsdp.model_state_bytes());
  const MemoryEstimate bf16 = estimate_memory(m, spec, StrategyKind::Fsdp, false, MixedPrecision::Bf16, on(n));
  BOOST_TEST(bf16.gathered_bytes == 2 * 2 * m.largest_unit_params);
  // Offload: the shards and the optimizer leave the device.
  const MemoryEstimate off = estimate_memory(m, spec, StrategyKind::Fsdp, true, MixedPrecision::No, on(n));
  BOOST_TEST(off.grad_bytes == 0);
  BOOST_TEST(off.optimizer_bytes == 0);
  BOOST_TEST(off.param_bytes == 4 * m.root_params);
  BOOST_TEST(off.host_bytes() == 16 * shard_elements(m, n));
  BOOST_TEST(off.host_param_bytes == 4 * shard_elements(m, n));
  BOOST_TEST(off.host_grad_bytes == 4 * shard_elements(m, n));
  BOOST_TEST(off.host_optimizer_bytes == 8 * shard_elements(m, n));
  const MemoryEstimate z2 = estimate_memory(m, spec, StrategyKind::Zero2, true, MixedPrecision::Bf16, on(n));
  BOOST_TEST(z2.optimizer_bytes == 0);
  BOOST_TEST(z2.host_bytes() == shard_elements(m, n) * 16);  // master, grad, m, v in fp32
  BOOST_TEST(z2.param_bytes == 2 * m.params);
  BOOST_TEST(z2.grad_bytes == 2 * shard_elements(m, n));
}

BOOST_AUTO_TEST_CASE(shards_round_up_per_parameter) {
  // torch.chunk along dim 0, parameter by parameter: the largest rank holds
  // ⌈rows/N⌉ rows of each, which can exceed ⌈Ψ/N⌉.
  ModelFootprint m = bare(0);
  m.tensors = {{10, 3}, {1, 5}, {4, 1}};  // 30 + 5 + 4 = 39 elements
  m.params = 39;
  BOOST_TEST(shard_elements(m, 1) == 39);
  BOOST_TEST(shard_elements(m, 3) == 4 * 3 + 1 * 5 + 2 * 1);  // 19, where ⌈39/3⌉ = 13
  BOOST_TEST(shard_elements(m, 4) == 3 * 3 + 5 + 1);
  m.tensors.clear();  // a bare count: ⌈Ψ/N⌉
  BOOST_TEST(shard_elements(m, 4) == 10);
  BOOST_CHECK_THROW(shard_elements(m, 0), Error);
  // The bundled GPT at np 3: within 1 % of ⌈Ψ/N⌉, the difference the
  // measured test (tests/mpi/test_estimate_vs_measured.cpp) sees.
  const ModelFootprint gpt4 = model_footprint("gpt", gpt(4, 128, 4, 64));
  BOOST_TEST(shard_elements(gpt4, 3) > (gpt4.params + 2) / 3);
  BOOST_TEST(shard_elements(gpt4, 3) < (gpt4.params + 2) / 3 * 101 / 100);
}

BOOST_AUTO_TEST_CASE(activation_terms) {
  const ModelSpec spec = gpt(4, 128, 4, 128);
  const int64_t b = 8, t = 128, c = 128, h = 4, v = 256;
  // Korthikanti et al.: s·b·h·(34 + 5·a·s/h) per layer at 2 bytes.
  const int64_t layer = 34 * b * t * c + 5 * b * h * t * t;
  const int64_t head = 4 * b * t * c + 4 * b * t * v;
  BOOST_TEST(activation_bytes("gpt", spec, b, 2, false) == 4 * layer + head);
  // fp32 doubles the 2-byte terms; the fp32 log-probabilities stay.
  BOOST_TEST(activation_bytes("gpt", spec, b, 4, false) == 2 * 4 * layer + 2 * 4 * b * t * c + 4 * b * t * v);
  // Checkpointing: each layer's input plus one layer being recomputed.
  BOOST_TEST(activation_bytes("gpt", spec, b, 2, true) == 4 * b * t * c * 2 + layer + head);
  BOOST_TEST(activation_bytes("gpt", spec, b, 2, true) < activation_bytes("gpt", spec, b, 2, false) / 2);
  // Linear in the batch.
  BOOST_TEST(activation_bytes("gpt", spec, 2 * b, 4, false) == 2 * activation_bytes("gpt", spec, b, 4, false));
  ModelSpec mlp;
  mlp.hidden_size = 256;
  mlp.mlp_layers = 3;
  BOOST_TEST(activation_bytes("mlp", mlp, 32, 4, true) < activation_bytes("mlp", mlp, 32, 4, false));
  BOOST_TEST(activation_bytes("cnn", mlp, 32, 4, false) > 0);
  BOOST_CHECK_THROW(activation_bytes("gpt", spec, 0, 4, false), Error);
}

BOOST_AUTO_TEST_CASE(all_rows_of_a_config) {
  Config config;
  config.train.model = "gpt";
  config.train.batch_size = 4;
  const std::vector<MemoryEstimate> rows = estimate_all(config, 8);
  BOOST_TEST(rows.size() == 21u);  // (4 strategies + 3 offloaded) × 3 precisions
  for (const MemoryEstimate& r : rows) {
    BOOST_TEST(r.world_size == 8);
    BOOST_TEST(r.activation_bytes > 0);
    BOOST_TEST(r.device_peak_bytes() == r.param_bytes + r.grad_bytes + r.optimizer_bytes + r.gathered_bytes +
                                            r.activation_bytes);
  }
  const ModelSpec spec = ModelSpec::from(config.model, config.train.seq_len);
  const ModelFootprint m = model_footprint("gpt", spec);
  const std::string table = format_estimate_table(config, m, rows);
  BOOST_TEST(table.find("fsdp/zero3+offload") != std::string::npos);
  BOOST_TEST(table.find("device peak") != std::string::npos);
  const std::string json = format_estimate_json(config, m, rows);
  BOOST_TEST(json.find("\"params\": " + std::to_string(m.params)) != std::string::npos);
  config.fsdp.activation_checkpointing = true;
  BOOST_TEST(estimate_all(config, 8)[0].activation_bytes < rows[0].activation_bytes);
}

// Pipeline stages: each rank's footprint is the parameters its stages'
// pieces hold in a model cut as the Pipeline cuts it (the tied GPT embedding
// on the first and the last stage), and its activations those of the
// microbatches the schedule keeps in flight.
BOOST_AUTO_TEST_CASE(pipeline_stages_hold_their_pieces) {
  const ModelSpec g = gpt(4, 64, 4, 32);
  const ModelFootprint whole = model_footprint("gpt", g);
  const ModelFootprint first = pipeline_stage_footprint("gpt", g, 1, {{0, 2}});
  const ModelFootprint last = pipeline_stage_footprint("gpt", g, 1, {{2, 4}});
  BOOST_TEST(first.params + last.params == whole.params + g.vocab_size * g.n_embd);  // wte twice
  BOOST_TEST(pipeline_stage_footprint("gpt", g, 1, {{0, 4}}).params == whole.params);
  BOOST_TEST(first.units == 2);
  BOOST_TEST(last.root_params == 2 * g.n_embd + g.vocab_size * g.n_embd);  // ln_f and the tied head

  ModelSpec l = g;
  l.n_kv_head = 2;
  l.intermediate_size = 96;
  const ModelFootprint llama = model_footprint("llama", l);
  // Counted from the built model: every stage's pieces of the untied Llama sum to the whole.
  auto model = make_model("llama", l);
  BOOST_TEST(count_footprint(*model, model_unit_classes("llama")).params == llama.params);
  int64_t sum = 0;
  for (auto stage : std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 3}, {3, 4}})
    sum += pipeline_stage_footprint("llama", l, 1, {stage}).params;
  BOOST_TEST(sum == llama.params);
  // Interleaved: a rank holding stages 0 and 2 of 4.
  BOOST_TEST(pipeline_stage_footprint("llama", l, 1, {{0, 1}, {2, 3}}).units == 2);
  BOOST_TEST(mpiaccel::test::message_of([] { pipeline_stage_footprint("mlp", ModelSpec{}, 1, {{0, 1}}); })
                 .find("does not declare pipeline pieces") != std::string::npos);

  // pp 2 under 1f1b with 4 microbatches of 4: rank 0 (layers 0-1, no head)
  // keeps 2 in flight; the rows are the heaviest rank's.
  Config config = Config::defaults({"train.model=llama", "model.n_layer=4", "model.n_embd=64", "model.n_head=4",
                                    "model.n_kv_head=2", "model.intermediate_size=96", "train.seq_len=32",
                                    "train.batch_size=16", "parallelism.pp_size=2", "parallelism.pp_microbatches=4"});
  const ModelSpec spec = ModelSpec::from(config.model, config.train.seq_len);
  const std::vector<MemoryEstimate> rows = estimate_all(config, 2);
  BOOST_TEST(rows.front().pp_size == 2);
  BOOST_TEST(rows.front().world_size == 2);
  ModelSpec two = spec;
  two.n_layer = 2;
  ModelSpec one = spec;
  one.n_layer = 1;
  const int64_t head = 2 * activation_bytes("llama", one, 4, 4, false) - activation_bytes("llama", two, 4, 4, false);
  const int64_t first_rank = 2 * (activation_bytes("llama", two, 4, 4, false) - head);
  const int64_t last_rank = 1 * activation_bytes("llama", two, 4, 4, false);
  // ddp fp32 (the first row): 16 bytes per parameter (gradients as bucket views).
  const int64_t first_peak = 16 * pipeline_stage_footprint("llama", spec, 1, {{0, 2}}).params + first_rank;
  const int64_t last_peak = 16 * pipeline_stage_footprint("llama", spec, 1, {{2, 4}}).params + last_rank;
  BOOST_TEST(rows.front().strategy == "ddp");
  BOOST_TEST(rows.front().activation_bytes == (first_peak >= last_peak ? first_rank : last_rank));
  BOOST_TEST(rows.front().device_peak_bytes() == std::max(first_peak, last_peak));
}
