// A checkpoint of a model cut into pipeline stages (pipeline.hpp,
// state_of_all_stages): each rank's strategy describes its stage's tensors;
// the file holds the whole model, so every rank lists every stage's tensors
// (in pipeline-rank order, the same list everywhere) and writes rows of its
// own only. A tied parameter's rows come from its lowest stage.

#include <ATen/ATen.h>

#include <map>
#include <set>
#include <sstream>
#include <string>

#include "pipeline/pipeline_state.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel {
namespace {

// "name dtype d0 d1 ...", one tensor per line.
std::string encode(const ShardedStateDict& dict) {
  std::ostringstream out;
  for (const ShardedTensor& t : dict.tensors) {
    out << t.name << ' ' << static_cast<int>(t.local.scalar_type());
    for (int64_t d : t.global_shape) out << ' ' << d;
    out << '\n';
  }
  return out.str();
}

// Another stage's tensor: its name and shape, no rows here.
ShardedTensor elsewhere(const std::string& line) {
  std::istringstream in(line);
  ShardedTensor t;
  int dtype = 0;
  in >> t.name >> dtype;
  for (int64_t d; in >> d;) t.global_shape.push_back(d);
  std::vector<int64_t> empty = t.global_shape;
  if (empty.empty()) empty.push_back(0);
  else empty[0] = 0;
  t.local = at::empty(empty, at::TensorOptions().dtype(static_cast<at::ScalarType>(dtype)));
  return t;
}

// Whether `name` ("model/<fqn>", "optim/<fqn>/<slot>") is a state of one of `params`.
bool is_one_of(const std::string& name, const std::vector<std::string>& params) {
  for (const std::string& p : params)
    if (name == "model/" + p || name.rfind("optim/" + p + "/", 0) == 0) return true;
  return false;
}

}  // namespace

ShardedStateDict Pipeline::state_of_all_stages(ShardedStateDict local) const {
  const detail::PipelineState& s = *impl_;
  const std::vector<std::string> lists = s.pp->all_gather_bytes(encode(local));
  std::map<std::string, ShardedTensor> mine;
  for (ShardedTensor& t : local.tensors) mine[t.name] = std::move(t);
  ShardedStateDict all;
  all.attributes = std::move(local.attributes);
  std::set<std::string> listed;
  for (size_t r = 0; r < lists.size(); ++r) {
    std::istringstream lines(lists[r]);
    for (std::string line; std::getline(lines, line);) {
      ShardedTensor t = elsewhere(line);
      if (!listed.insert(t.name).second) continue;  // a tied parameter, listed by its lowest stage
      auto own = mine.find(t.name);
      if (own != mine.end() && (s.counts_tied || !is_one_of(t.name, s.tied_names))) t = std::move(own->second);
      all.tensors.push_back(std::move(t));
    }
  }
  // Attributes (optimizer hyperparameters and counters) of every stage.
  std::ostringstream attrs;
  for (const auto& [key, value] : all.attributes) attrs << key << '\n' << value.size() << '\n' << value;
  for (const std::string& blob : s.pp->all_gather_bytes(attrs.str())) {
    std::istringstream in(blob);
    for (std::string key; std::getline(in, key);) {
      std::string length;
      std::getline(in, length);
      std::string value(std::stoul(length), '\0');
      in.read(value.data(), static_cast<std::streamsize>(value.size()));
      all.attributes.emplace(key, value);
    }
  }
  return all;
}

}  // namespace mpiaccel
