// ctest: links mpiaccel; timeout 60
// The pipeline schedules and stage cuts (pipeline_schedule.hpp): every
// schedule, replayed on all ranks at once with receives that wait and sends
// that do not, runs every forward and backward once, in an order that
// cannot deadlock; its in-flight activations are as the papers count them;
// the cut balances costs or follows pp_layers; the errors are one line.
#define BOOST_TEST_MODULE pipeline_schedule
#include <boost/test/unit_test.hpp>

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "mpiaccel/pipeline_schedule.hpp"
#include "support/scratch_dir.hpp"

using mpiaccel::PipelineAction;
using mpiaccel::PipelineScheduleKind;
using mpiaccel::pipeline_cut;
using mpiaccel::pipeline_schedule;
using mpiaccel::test::message_of;
using Kind = PipelineAction::Kind;

namespace {

struct Replay {
  bool finished = false;
  int64_t ticks = 0;                 // rounds in which some rank ran an action
  std::vector<int64_t> most_in_flight;  // per rank: forwards whose backward has not run
};

// Runs the ranks' schedules in lock step: in each round every rank runs its
// next action if what it waits for is there (a forward needs the previous
// stage's forward of the microbatch, a backward the next stage's input
// gradient, a weight pass its own input-gradient pass).
Replay replay(PipelineScheduleKind kind, int64_t ranks, int64_t chunks, int64_t microbatches) {
  const int64_t stages = ranks * chunks;
  std::vector<std::vector<PipelineAction>> orders;
  for (int64_t r = 0; r < ranks; ++r) orders.push_back(pipeline_schedule(kind, r, ranks, chunks, microbatches));
  std::set<std::tuple<int, int64_t, int64_t>> done;  // (kind, microbatch, stage)
  auto has = [&](Kind k, int64_t m, int64_t s) { return done.count({static_cast<int>(k), m, s}) > 0; };
  auto input_grad_done = [&](int64_t m, int64_t s) { return has(Kind::Backward, m, s) || has(Kind::BackwardInput, m, s); };
  std::vector<size_t> next(static_cast<size_t>(ranks), 0);
  Replay result;
  result.most_in_flight.assign(static_cast<size_t>(ranks), 0);
  std::vector<int64_t> in_flight(static_cast<size_t>(ranks), 0);
  for (bool progress = true; progress;) {
    progress = false;
    std::vector<PipelineAction> ran;
    for (int64_t r = 0; r < ranks; ++r) {
      if (next[r] == orders[r].size()) continue;
      const PipelineAction& a = orders[r][next[r]];
      BOOST_TEST(a.stage % ranks == r);
      bool ready = false;
      if (a.kind == Kind::Forward) ready = a.stage == 0 || has(Kind::Forward, a.microbatch, a.stage - 1);
      else if (a.kind == Kind::BackwardWeight) ready = has(Kind::BackwardInput, a.microbatch, a.stage);
      else ready = has(Kind::Forward, a.microbatch, a.stage) &&
                   (a.stage == stages - 1 || input_grad_done(a.microbatch, a.stage + 1));
      if (!ready) continue;
      ran.push_back(a);
      ++next[r];
      in_flight[r] += a.kind == Kind::Forward ? 1 : (a.kind == Kind::BackwardWeight ? 0 : -1);
      result.most_in_flight[r] = std::max(result.most_in_flight[r], in_flight[r]);
    }
    for (const PipelineAction& a : ran) done.insert({static_cast<int>(a.kind), a.microbatch, a.stage});
    if (!ran.empty()) {
      progress = true;
      ++result.ticks;
    }
  }
  result.finished = true;
  for (int64_t r = 0; r < ranks; ++r) result.finished = result.finished && next[r] == orders[r].size();
  // Every (microbatch, stage) ran its forward and its backward once.
  for (int64_t m = 0; m < microbatches; ++m)
    for (int64_t s = 0; s < stages; ++s) {
      BOOST_TEST(has(Kind::Forward, m, s));
      BOOST_TEST(input_grad_done(m, s));
      if (kind == PipelineScheduleKind::ZeroBubbleH1) BOOST_TEST(has(Kind::BackwardWeight, m, s));
    }
  return result;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_schedule_runs_to_the_end_at_every_size) {
  for (int64_t ranks : {1, 2, 3, 4})
    for (int64_t m : {ranks, ranks * 2, ranks * 3 + (ranks > 1 ? 1 : 0)}) {
      BOOST_TEST(replay(PipelineScheduleKind::GPipe, ranks, 1, m).finished);
      BOOST_TEST(replay(PipelineScheduleKind::OneFOneB, ranks, 1, m).finished);
      BOOST_TEST(replay(PipelineScheduleKind::ZeroBubbleH1, ranks, 1, m).finished);
      if (m % ranks == 0)
        for (int64_t chunks : {2, 3}) BOOST_TEST(replay(PipelineScheduleKind::Interleaved1F1B, ranks, chunks, m).finished);
    }
  BOOST_TEST(replay(PipelineScheduleKind::GPipe, 4, 1, 1).finished);  // GPipe takes any count
}

BOOST_AUTO_TEST_CASE(one_f_one_b_keeps_at_most_ranks_minus_rank_microbatches_alive) {
  const Replay onefb = replay(PipelineScheduleKind::OneFOneB, 4, 1, 8);
  const Replay gpipe = replay(PipelineScheduleKind::GPipe, 4, 1, 8);
  for (int64_t r = 0; r < 4; ++r) {
    BOOST_TEST(onefb.most_in_flight[r] == 4 - r);
    BOOST_TEST(gpipe.most_in_flight[r] == 8);
  }
  // In lock-step rounds (one action of equal length each), 1F1B and GPipe
  // take 2(m + p - 1) rounds: the same bubble, less memory.
  BOOST_TEST(onefb.ticks == 2 * (8 + 4 - 1));
  BOOST_TEST(gpipe.ticks == 2 * (8 + 4 - 1));
}

BOOST_AUTO_TEST_CASE(interleaving_shortens_the_pipeline_fill) {
  // v chunks of 1/v the work: the fill and drain take (p - 1) chunk-rounds
  // instead of (p - 1) stage-rounds, so the rounds of chunk work are
  // 2(m·v + p - 1) where 1F1B needs v·2(m + p - 1) of them.
  const Replay interleaved = replay(PipelineScheduleKind::Interleaved1F1B, 4, 2, 8);
  BOOST_TEST(interleaved.ticks < 2 * 2 * (8 + 4 - 1));
}

BOOST_AUTO_TEST_CASE(pp_layers_gives_the_cut_and_balance_evens_the_costs) {
  using Cut = std::vector<std::pair<int64_t, int64_t>>;
  BOOST_TEST((pipeline_cut({1, 1, 1, 1, 1, 1, 1, 1}, 0, 0, 2, "0-2,3-7") == Cut{{0, 3}, {3, 8}}));
  BOOST_TEST((pipeline_cut({1, 1, 1, 1, 1, 1, 1, 1}, 0, 0, 4, "") == Cut{{0, 2}, {2, 4}, {4, 6}, {6, 8}}));
  // The head's cost on the last stage moves a layer to the first.
  BOOST_TEST((pipeline_cut({1, 1, 1, 1}, 0, 2, 2, "") == Cut{{0, 3}, {3, 4}}));
  BOOST_TEST((pipeline_cut({5, 1, 1, 1, 1, 1}, 0, 0, 2, "") == Cut{{0, 1}, {1, 6}}));
  BOOST_TEST(message_of([] { pipeline_cut({1, 1}, 0, 0, 3, ""); }) ==
             "pipeline parallelism: 3 stages (pp_size × pp_virtual_stages) but the model has 2 layers; each stage "
             "needs one: lower pp_size or pp_virtual_stages");
  BOOST_TEST(message_of([] { pipeline_cut({1, 1, 1, 1}, 0, 0, 2, "0-1,3-3"); }).find(
                 "[parallelism] pp_layers = 0-1,3-3: '3-3' should start at layer 2") == 0);
  BOOST_TEST(message_of([] { pipeline_cut({1, 1, 1, 1}, 0, 0, 2, "0-1,2-2"); }).find(
                 "[parallelism] pp_layers = 0-1,2-2 gives 2 stages over layers 0-2, but the pipeline has 2 stages "
                 "and the model 4 layers") == 0);
  BOOST_TEST(message_of([] { pipeline_cut({1, 1, 1, 1}, 0, 0, 2, "0-x"); }).find("'0-x' is not a layer range") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(schedule_errors_are_one_line) {
  BOOST_TEST(message_of([] { pipeline_schedule(PipelineScheduleKind::OneFOneB, 0, 4, 1, 2); }) ==
             "[parallelism] pp_microbatches = 2 with pp_size 4: 1f1b and zb_h1 need at least pp_size microbatches "
             "(set pp_microbatches, or [train] grad_accum_steps, to one; or pp_schedule = gpipe)");
  BOOST_TEST(message_of([] { pipeline_schedule(PipelineScheduleKind::Interleaved1F1B, 0, 2, 2, 3); }).find(
                 "interleaved_1f1b needs a multiple of pp_size") != std::string::npos);
  BOOST_TEST(message_of([] { pipeline_schedule(PipelineScheduleKind::Interleaved1F1B, 0, 2, 1, 4); }).find(
                 "interleaved_1f1b holds 2 or more stages per rank") != std::string::npos);
  BOOST_TEST(message_of([] { mpiaccel::choice_named<mpiaccel::PipelineScheduleKind>("zb_v", "[parallelism] pp_schedule"); }) ==
             "[parallelism] pp_schedule = zb_v is unknown; accepted: gpipe|1f1b|interleaved_1f1b|zb_h1");
}
