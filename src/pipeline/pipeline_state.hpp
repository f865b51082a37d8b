#pragma once
// Internal: what a Pipeline holds (pipeline.hpp): the cut, this rank's
// stages, the tied parameters and the message channels.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "pipeline/stage_messages.hpp"
#include "mpiaccel/pipeline.hpp"

namespace mpiaccel {

struct detail::PipelineState {
  PipelineState(PipelineOptions o, std::shared_ptr<torch::nn::Module> m, PipelineModel& pm)
      : options(std::move(o)), module(std::move(m)), model(pm) {}

  PipelineOptions options;
  std::shared_ptr<torch::nn::Module> module;
  PipelineModel& model;
  std::shared_ptr<Communicator> pp;  // the mesh's pipeline group, ordered by stage
  int64_t ranks = 1, rank = 0, virtual_stages = 1, stage_count = 1, microbatches = 1;
  PipelineScheduleKind kind = PipelineScheduleKind::OneFOneB;
  std::vector<std::pair<int64_t, int64_t>> cut;  // layers of each stage
  std::vector<int64_t> stages;                   // this rank's
  // Parameters another rank holds too (a tied embedding): summed over `tied`.
  std::vector<at::Tensor> tied_params;
  std::vector<std::string> tied_names;  // their names in the model
  std::shared_ptr<Communicator> tied;
  bool counts_tied = true;  // this rank is the lowest holding them
  std::unique_ptr<detail::StageMessages> activations, gradients;
  Pipeline::Timing timing;

  int rank_of(int64_t stage) const { return static_cast<int>(stage % ranks); }
  bool is_first(int64_t stage) const { return stage == 0; }
  bool is_last(int64_t stage) const { return stage == stage_count - 1; }
  /// "stage 1 (rank 1)".
  std::string stage_name(int64_t stage) const;
};

}  // namespace mpiaccel
