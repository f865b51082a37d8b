// Which layers each pipeline stage holds (pipeline_schedule.hpp).

#include <algorithm>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "mpiaccel/error.hpp"
#include "mpiaccel/pipeline_schedule.hpp"

namespace mpiaccel {
namespace {

using Cut = std::vector<std::pair<int64_t, int64_t>>;

// "0-3,4-7" as ranges; each part "a-b" or "a".
Cut parse_layers(const std::string& spec, int64_t layers, int64_t stages) {
  const std::string usage = " (e.g. pp_layers = 0-3,4-7: each stage's first and last layer, in order, covering 0-" +
                            std::to_string(layers - 1) + " once)";
  Cut cut;
  std::stringstream parts(spec);
  std::string part;
  while (std::getline(parts, part, ',')) {
    part.erase(std::remove(part.begin(), part.end(), ' '), part.end());
    const size_t dash = part.find('-');
    int64_t first = -1, last = -1;
    try {
      size_t used = 0;
      first = std::stoll(part.substr(0, dash), &used);
      MPIACCEL_CHECK(used == (dash == std::string::npos ? part.size() : dash), "");
      last = first;
      if (dash != std::string::npos) {
        last = std::stoll(part.substr(dash + 1), &used);
        MPIACCEL_CHECK(used == part.size() - dash - 1, "");
      }
    } catch (const std::exception&) {
      MPIACCEL_THROW("[parallelism] pp_layers = " + spec + ": '" + part + "' is not a layer range" + usage);
    }
    const int64_t begin = cut.empty() ? 0 : cut.back().second;
    MPIACCEL_CHECK(first == begin && last >= first && last < layers,
                   "[parallelism] pp_layers = " + spec + ": '" + part + "' should start at layer " + std::to_string(begin) +
                       " and end by layer " + std::to_string(layers - 1) + usage);
    cut.emplace_back(first, last + 1);
  }
  MPIACCEL_CHECK(!cut.empty() && cut.back().second == layers && static_cast<int64_t>(cut.size()) == stages,
                 "[parallelism] pp_layers = " + spec + " gives " + std::to_string(static_cast<int64_t>(cut.size())) +
                     " stages over layers 0-" + std::to_string(cut.empty() ? -1 : cut.back().second - 1) + ", but the pipeline has " +
                     std::to_string(stages) + " stages and the model " + std::to_string(layers) + " layers" + usage);
  return cut;
}

// The contiguous cut of `costs` into `stages` parts (each at least one
// layer) whose costliest part costs least; the first piece's cost counts on
// the first part, the last piece's on the last. Ties keep stages early.
Cut balance(const std::vector<double>& costs, double first_cost, double last_cost, int64_t stages) {
  const int64_t layers = static_cast<int64_t>(costs.size());
  std::vector<double> prefix(costs.size() + 1, 0.0);
  for (size_t i = 0; i < costs.size(); ++i) prefix[i + 1] = prefix[i] + costs[i];
  auto part = [&](int64_t s, int64_t begin, int64_t end) {
    return prefix[end] - prefix[begin] + (s == 0 ? first_cost : 0.0) + (s == stages - 1 ? last_cost : 0.0);
  };
  const double inf = std::numeric_limits<double>::infinity();
  // best[s][e]: the least max cost of stages 0..s holding layers [0, e).
  std::vector<std::vector<double>> best(stages, std::vector<double>(layers + 1, inf));
  std::vector<std::vector<int64_t>> from(stages, std::vector<int64_t>(layers + 1, 0));
  for (int64_t e = 1; e <= layers; ++e) best[0][e] = part(0, 0, e);
  for (int64_t s = 1; s < stages; ++s)
    for (int64_t e = s + 1; e <= layers; ++e)
      for (int64_t b = s; b < e; ++b) {
        const double worst = std::max(best[s - 1][b], part(s, b, e));
        if (worst < best[s][e]) {
          best[s][e] = worst;
          from[s][e] = b;
        }
      }
  Cut cut(static_cast<size_t>(stages));
  int64_t end = layers;
  for (int64_t s = stages - 1; s >= 0; --s) {
    const int64_t begin = s == 0 ? 0 : from[s][end];
    cut[static_cast<size_t>(s)] = {begin, end};
    end = begin;
  }
  return cut;
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> pipeline_cut(const std::vector<double>& costs, double first_cost,
                                                      double last_cost, int64_t stages, const std::string& spec) {
  const int64_t layers = static_cast<int64_t>(costs.size());
  MPIACCEL_CHECK(stages >= 1 && stages <= layers,
                 "pipeline parallelism: " + std::to_string(stages) + " stages (pp_size × pp_virtual_stages) but the model has " +
                     std::to_string(layers) + " layers; each stage needs one: lower pp_size or pp_virtual_stages");
  return spec.empty() ? balance(costs, first_cost, last_cost, stages) : parse_layers(spec, layers, stages);
}

}  // namespace mpiaccel
