// Cutting a model into pipeline stages (pipeline.hpp): the layers of each
// stage, the modules this rank keeps, and the parameters two stages share.

#include "mpiaccel/pipeline.hpp"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <map>
#include <set>

#include "pipeline/pipeline_state.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel {
namespace {

using ModuleMap = std::map<std::string, std::shared_ptr<torch::nn::Module>>;

ModuleMap modules_by_path(torch::nn::Module& root) {
  ModuleMap map;
  for (const auto& item : root.named_modules("", /*include_self=*/true)) map[item.key()] = item.value();
  return map;
}

std::shared_ptr<torch::nn::Module> module_at(const ModuleMap& modules, const std::string& path) {
  auto found = modules.find(path);
  MPIACCEL_CHECK(found != modules.end(), "pipeline parallelism: the model's pieces name the module '" + path +
                                             "', which it does not have (pipeline_pieces names registered paths)");
  return found->second;
}

double parameter_count(const ModuleMap& modules, const std::vector<std::string>& paths) {
  std::set<const void*> seen;
  double count = 0;
  for (const std::string& path : paths)
    for (const at::Tensor& p : module_at(modules, path)->parameters())
      if (seen.insert(p.unsafeGetTensorImpl()).second) count += static_cast<double>(p.numel());
  return count;
}

// The modules of each stage's pieces, by path.
std::vector<std::set<std::string>> stage_modules(const PipelinePieces& pieces,
                                                 const std::vector<std::pair<int64_t, int64_t>>& cut) {
  std::vector<std::set<std::string>> held(cut.size());
  for (size_t s = 0; s < cut.size(); ++s) {
    if (s == 0) held[s].insert(pieces.first.begin(), pieces.first.end());
    if (s + 1 == cut.size()) held[s].insert(pieces.last.begin(), pieces.last.end());
    for (int64_t l = cut[s].first; l < cut[s].second; ++l)
      held[s].insert(pieces.layers[static_cast<size_t>(l)].begin(), pieces.layers[static_cast<size_t>(l)].end());
  }
  return held;
}

// Replaces the module at `path` by an empty one and frees the memory of its
// parameters and buffers that no kept module uses.
void remove_module(torch::nn::Module& root, const ModuleMap& modules, const std::string& path,
                   const std::unordered_set<const void*>& kept) {
  const size_t dot = path.rfind('.');
  const std::string parent = dot == std::string::npos ? "" : path.substr(0, dot);
  const std::string child = dot == std::string::npos ? path : path.substr(dot + 1);
  const auto removed = module_at(modules, path);
  at::NoGradGuard no_grad;
  for (at::Tensor t : removed->parameters())
    if (!kept.count(t.unsafeGetTensorImpl())) t.set_data(at::empty({0}, t.options()));
  for (at::Tensor t : removed->buffers())
    if (!kept.count(t.unsafeGetTensorImpl())) t.set_data(at::empty({0}, t.options()));
  torch::nn::Module& holder = parent.empty() ? root : *module_at(modules, parent);
  holder.replace_module(child, std::make_shared<torch::nn::Module>("PipelineStageElsewhere"));
}

}  // namespace

std::string detail::PipelineState::stage_name(int64_t stage) const {
  return "stage " + std::to_string(stage) + " (rank " + std::to_string(rank_of(stage)) + " of the pipeline)";
}

Pipeline::Pipeline(PipelineOptions options, std::shared_ptr<torch::nn::Module> module, PipelineModel& model)
    : impl_(std::make_unique<detail::PipelineState>(std::move(options), std::move(module), model)) {
  detail::PipelineState& s = *impl_;
  const PipelineOptions& o = s.options;
  MPIACCEL_CHECK(o.group && o.strategy, "Pipeline: the options name no pp group or no strategy");
  s.pp = o.group;
  s.ranks = s.pp->size();
  s.rank = s.pp->rank();
  s.kind = o.schedule;
  s.virtual_stages = o.virtual_stages > 0 ? o.virtual_stages
                                          : (s.kind == PipelineScheduleKind::Interleaved1F1B ? 2 : 1);
  s.stage_count = s.ranks * s.virtual_stages;
  s.microbatches = o.microbatches;
  pipeline_schedule(s.kind, s.rank, s.ranks, s.virtual_stages, s.microbatches);  // checks the numbers

  const PipelinePieces pieces = model.pipeline_pieces();
  MPIACCEL_CHECK(!pieces.layers.empty(), "pipeline parallelism: the model declares no layers (pipeline_pieces)");
  const ModuleMap modules = modules_by_path(*s.module);
  std::vector<double> costs;
  for (const auto& layer : pieces.layers) costs.push_back(parameter_count(modules, layer));
  s.cut = pipeline_cut(costs, 0.0, parameter_count(modules, pieces.last), s.stage_count, o.layers);
  for (int64_t stage = s.rank; stage < s.stage_count; stage += s.ranks) s.stages.push_back(stage);

  // Which ranks hold each module; what this rank keeps.
  const auto held = stage_modules(pieces, s.cut);
  std::map<std::string, std::set<int>> holders;
  for (size_t stage = 0; stage < held.size(); ++stage)
    for (const std::string& path : held[stage]) holders[path].insert(s.rank_of(static_cast<int64_t>(stage)));
  std::unordered_set<const void*> kept;
  std::set<int> tied_ranks;
  for (const auto& [path, ranks] : holders) {
    if (!ranks.count(static_cast<int>(s.rank))) continue;
    for (const at::Tensor& p : module_at(modules, path)->parameters()) kept.insert(p.unsafeGetTensorImpl());
    for (const at::Tensor& b : module_at(modules, path)->buffers()) kept.insert(b.unsafeGetTensorImpl());
    if (ranks.size() < 2) continue;
    MPIACCEL_CHECK(tied_ranks.empty() || tied_ranks == ranks,
                   "pipeline parallelism: modules shared by pieces on more than two sets of ranks (" + path +
                       "); share a module between the first and the last piece only");
    tied_ranks = ranks;
    for (const at::Tensor& p : module_at(modules, path)->parameters()) s.tied_params.push_back(p);
  }
  for (const auto& [path, ranks] : holders)
    if (!ranks.count(static_cast<int>(s.rank))) remove_module(*s.module, modules, path, kept);

  // Every rank knows every holder set, so all agree on who splits.
  bool any_tied = false;
  for (const auto& [path, ranks] : holders) any_tied = any_tied || ranks.size() > 1;
  if (any_tied) {
    std::set<int> all_tied;
    for (const auto& [path, ranks] : holders)
      if (ranks.size() > 1) all_tied = ranks;
    const bool member = all_tied.count(static_cast<int>(s.rank)) > 0;
    // Checked on every rank (all know the holders), so none goes on alone.
    MPIACCEL_CHECK(!o.strategy_shards_gradients,
                   "pipeline parallelism: the model ties a module of its first piece to its last (the GPT's "
                   "embedding and head), held by pipeline ranks " + std::to_string(*all_tied.begin()) + " and " +
                       std::to_string(*all_tied.rbegin()) + ", and [distributed] strategy " + o.strategy_name +
                       " shards its gradients; use strategy = ddp, or zero with zero.stage = 1, or an untied model "
                       "(the Llama with tie_word_embeddings = false)");
    s.tied = s.pp->split(member ? 0 : -1, static_cast<int>(s.rank));
    s.counts_tied = !member || *all_tied.begin() == s.rank;
  }
  for (const auto& item : s.module->named_parameters())
    for (const at::Tensor& p : s.tied_params)
      if (p.unsafeGetTensorImpl() == item.value().unsafeGetTensorImpl()) s.tied_names.push_back(item.key());
  // NCCL runs a rank's messages of one communicator in order on one stream;
  // interleaving's wrap-around from the last rank to the first makes that
  // order circular (rank 0 sends twice before it receives what rank 1 sends
  // before receiving its second), which can deadlock once messages outgrow
  // NCCL's buffers.
  MPIACCEL_CHECK(s.kind != PipelineScheduleKind::Interleaved1F1B || s.pp->backend() != Backend::Nccl,
                 "[parallelism] pp_schedule = interleaved_1f1b does not run over NCCL yet (its wrap-around "
                 "messages can deadlock on one stream); use pp_schedule = 1f1b or zb_h1, or [distributed] "
                 "backend = mpi");
  s.activations = std::make_unique<detail::StageMessages>(s.pp->split(0, static_cast<int>(s.rank)), "activations");
  s.gradients = std::make_unique<detail::StageMessages>(s.pp->split(0, static_cast<int>(s.rank)), "gradients");
}

Pipeline::~Pipeline() = default;

int64_t Pipeline::stage_count() const { return impl_->stage_count; }
const std::vector<int64_t>& Pipeline::stages() const { return impl_->stages; }
int64_t Pipeline::microbatches() const { return impl_->microbatches; }
PipelineScheduleKind Pipeline::schedule() const { return impl_->kind; }
Communicator& Pipeline::group() const { return *impl_->pp; }
Pipeline::Timing Pipeline::last_timing() const { return impl_->timing; }

bool Pipeline::counts_in_grad_norm(const at::Tensor& param) const {
  if (impl_->counts_tied) return true;
  for (const at::Tensor& p : impl_->tied_params)
    if (p.unsafeGetTensorImpl() == param.unsafeGetTensorImpl()) return false;
  return true;
}

std::string Pipeline::describe() const {
  const detail::PipelineState& s = *impl_;
  std::string text = "pipeline rank " + std::to_string(s.rank) + " of " + std::to_string(s.ranks) + ": ";
  for (size_t i = 0; i < s.stages.size(); ++i) {
    const int64_t stage = s.stages[i];
    text += (i ? "; " : "") + std::string("stage ") + std::to_string(stage) + " (layers " + std::to_string(s.cut[stage].first) + "-" +
            std::to_string(s.cut[stage].second - 1) + (s.is_first(stage) ? ", the first piece" : "") +
            (s.is_last(stage) ? ", the last piece" : "") + ")";
  }
  return text + " of " + std::to_string(s.stage_count) + ", schedule " + name_of(s.options.schedule) + ", " +
         std::to_string(s.microbatches) + " microbatches";
}

}  // namespace mpiaccel
