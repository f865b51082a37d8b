// The pipeline schedules (pipeline_schedule.hpp): each rank's order of
// forwards and backwards over (microbatch, stage).
//
// With non-blocking sends and receives waited for when an action needs them,
// an order is safe when every action's inputs come from actions that, on
// their own rank, come earlier than anything waiting on this one. The
// classic orders below are (tests/unit/test_pipeline_schedule.cpp replays
// them all).

#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "mpiaccel/error.hpp"
#include "mpiaccel/pipeline_schedule.hpp"

namespace mpiaccel {
namespace {

using Kind = PipelineAction::Kind;

PipelineAction action(Kind kind, int64_t microbatch, int64_t stage) { return {kind, microbatch, stage}; }

// GPipe: every forward, then every backward.
std::vector<PipelineAction> gpipe(int64_t rank, int64_t microbatches) {
  std::vector<PipelineAction> order;
  for (int64_t m = 0; m < microbatches; ++m) order.push_back(action(Kind::Forward, m, rank));
  for (int64_t m = 0; m < microbatches; ++m) order.push_back(action(Kind::Backward, m, rank));
  return order;
}

// 1F1B (PipeDream-Flush): rank r runs ranks - 1 - r forwards ahead, then
// alternates one forward and one backward, then drains the backwards. At
// most ranks - r microbatches' activations are alive at once.
std::vector<PipelineAction> one_f_one_b(int64_t rank, int64_t ranks, int64_t microbatches) {
  const int64_t warm = std::min(ranks - 1 - rank, microbatches);
  std::vector<PipelineAction> order;
  for (int64_t m = 0; m < warm; ++m) order.push_back(action(Kind::Forward, m, rank));
  for (int64_t i = 0; i + warm < microbatches; ++i) {
    order.push_back(action(Kind::Forward, warm + i, rank));
    order.push_back(action(Kind::Backward, i, rank));
  }
  for (int64_t m = microbatches - warm; m < microbatches; ++m) order.push_back(action(Kind::Backward, m, rank));
  return order;
}

// Interleaved 1F1B (Megatron-LM, Narayanan et al. 2021): rank r holds stages
// r, r + ranks, ... (v chunks). Forwards go through the chunks in groups of
// `ranks` microbatches; backwards through the chunks in reverse. The
// warm-up is longer by (v - 1)·ranks, the bubble shorter by v.
std::vector<PipelineAction> interleaved(int64_t rank, int64_t ranks, int64_t chunks, int64_t microbatches) {
  const int64_t total = microbatches * chunks;
  auto forward = [&](int64_t k) {
    const int64_t chunk = (k % (ranks * chunks)) / ranks;
    const int64_t microbatch = (k / (ranks * chunks)) * ranks + k % ranks;
    return action(Kind::Forward, microbatch, chunk * ranks + rank);
  };
  auto backward = [&](int64_t k) {
    PipelineAction a = forward(k);
    const int64_t chunk = chunks - 1 - a.stage / ranks;
    return action(Kind::Backward, a.microbatch, chunk * ranks + rank);
  };
  const int64_t warm = std::min((ranks - rank - 1) * 2 + (chunks - 1) * ranks, total);
  std::vector<PipelineAction> order;
  for (int64_t k = 0; k < warm; ++k) order.push_back(forward(k));
  for (int64_t i = 0; i + warm < total; ++i) {
    order.push_back(forward(warm + i));
    order.push_back(backward(i));
  }
  for (int64_t k = total - warm; k < total; ++k) order.push_back(backward(k));
  return order;
}

// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024): 1F1B's
// order with each backward split into the input gradient (B, which the
// previous stage waits for) and the weight gradient (W, which nobody waits
// for). Rank r keeps up to ranks - 1 - r W's pending in the steady phase and
// runs one after each B of the drain, where 1F1B would wait for the next
// gradient: the drain's bubble fills with weight gradients.
std::vector<PipelineAction> zero_bubble_h1(int64_t rank, int64_t ranks, int64_t microbatches) {
  std::vector<PipelineAction> order;
  std::deque<int64_t> pending;
  auto weight = [&] {
    order.push_back(action(Kind::BackwardWeight, pending.front(), rank));
    pending.pop_front();
  };
  const int64_t warm = std::min(ranks - 1 - rank, microbatches);
  for (int64_t m = 0; m < warm; ++m) order.push_back(action(Kind::Forward, m, rank));
  for (int64_t i = 0; i + warm < microbatches; ++i) {
    order.push_back(action(Kind::Forward, warm + i, rank));
    order.push_back(action(Kind::BackwardInput, i, rank));
    pending.push_back(i);
    if (static_cast<int64_t>(pending.size()) > ranks - 1 - rank) weight();
  }
  for (int64_t m = microbatches - warm; m < microbatches; ++m) {
    order.push_back(action(Kind::BackwardInput, m, rank));
    pending.push_back(m);
    weight();
  }
  while (!pending.empty()) weight();
  return order;
}

}  // namespace

std::vector<PipelineAction> pipeline_schedule(PipelineScheduleKind kind, int64_t rank, int64_t ranks,
                                              int64_t virtual_stages, int64_t microbatches) {
  MPIACCEL_CHECK(ranks >= 1 && rank >= 0 && rank < ranks && microbatches >= 1,
                 "pipeline_schedule: rank " + std::to_string(rank) + " of " + std::to_string(ranks) + ", " + std::to_string(microbatches) + " microbatches");
  const bool interleaving = kind == PipelineScheduleKind::Interleaved1F1B;
  MPIACCEL_CHECK(interleaving ? virtual_stages >= 2 : virtual_stages == 1,
                 "[parallelism] pp_virtual_stages = " + std::to_string(virtual_stages) +
                     (interleaving ? ": interleaved_1f1b holds 2 or more stages per rank"
                                   : ": only interleaved_1f1b holds several stages per rank; set it to 1 (or 0)"));
  if (kind != PipelineScheduleKind::GPipe)
    MPIACCEL_CHECK(microbatches >= ranks && (!interleaving || microbatches % ranks == 0),
                   "[parallelism] pp_microbatches = " + std::to_string(microbatches) + " with pp_size " + std::to_string(ranks) + ": " +
                       (interleaving ? "interleaved_1f1b needs a multiple of pp_size"
                                     : "1f1b and zb_h1 need at least pp_size microbatches") +
                       " (set pp_microbatches, or [train] grad_accum_steps, to one; or pp_schedule = gpipe)");
  switch (kind) {
    case PipelineScheduleKind::GPipe: return gpipe(rank, microbatches);
    case PipelineScheduleKind::OneFOneB: return one_f_one_b(rank, ranks, microbatches);
    case PipelineScheduleKind::Interleaved1F1B: return interleaved(rank, ranks, virtual_stages, microbatches);
    case PipelineScheduleKind::ZeroBubbleH1: return zero_bubble_h1(rank, ranks, microbatches);
  }
  MPIACCEL_THROW("pipeline_schedule: unknown kind");
}

}  // namespace mpiaccel
