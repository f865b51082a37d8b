// Cross-rank model check and rank-0 broadcast of parameters and buffers.

#include "state/model_sync.hpp"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>

#include <cstring>
#include <map>
#include <sstream>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"
#include "core/dtype_names.hpp"

namespace mpiaccel {
namespace {

struct Entry {
  std::string kind;  // "parameter" | "buffer"
  std::string name;
  std::string dtype;
  std::string shape;
};

std::vector<Entry> parse_fingerprint(const std::string& text) {
  std::vector<Entry> entries;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    Entry e;
    std::istringstream fields(line);
    std::getline(fields, e.kind, '\t');
    std::getline(fields, e.name, '\t');
    std::getline(fields, e.dtype, '\t');
    std::getline(fields, e.shape, '\t');
    entries.push_back(std::move(e));
  }
  return entries;
}

uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

// Every difference between rank 0's entries and another rank's, described from
// that rank's point of view. Computed identically on every rank from the same
// gathered bytes, so every rank throws the same text.
std::vector<std::string> differences(const std::vector<Entry>& ref, const std::vector<Entry>& mine) {
  std::map<std::string, const Entry*> ref_by_name, mine_by_name;
  for (const Entry& e : ref) ref_by_name[e.name] = &e;
  for (const Entry& e : mine) mine_by_name[e.name] = &e;
  std::vector<std::string> out;
  for (const Entry& e : mine) {
    auto it = ref_by_name.find(e.name);
    if (it == ref_by_name.end()) {
      out.push_back("has " + e.kind + " " + e.name + " " + e.shape + " that rank 0 lacks");
      continue;
    }
    const Entry& r = *it->second;
    if (e.kind != r.kind)
      out.push_back(e.name + " is a " + e.kind + ", on rank 0 a " + r.kind);
    else if (e.shape != r.shape)
      out.push_back(e.kind + " " + e.name + " has shape " + e.shape + ", rank 0 has " + r.shape);
    else if (e.dtype != r.dtype)
      out.push_back(e.kind + " " + e.name + " has dtype " + e.dtype + ", rank 0 has " + r.dtype);
  }
  for (const Entry& r : ref)
    if (!mine_by_name.count(r.name))
      out.push_back(r.kind + " " + r.name + " " + r.shape + " is missing (rank 0 has it)");
  if (out.empty()) {
    // Same set of tensors in another registration order: DDP pairs gradients by
    // position, so this is a real difference too.
    for (size_t i = 0; i < ref.size() && i < mine.size(); ++i)
      if (ref[i].name != mine[i].name) {
        out.push_back("tensors are registered in another order: position " + std::to_string(i) +
                      " is " + mine[i].name + ", on rank 0 " + ref[i].name);
        break;
      }
  }
  return out;
}

struct GroupKey {
  at::ScalarType dtype;
  at::Device device;
  bool operator<(const GroupKey& o) const {
    if (dtype != o.dtype) return dtype < o.dtype;
    if (device.type() != o.device.type()) return device.type() < o.device.type();
    return device.index() < o.device.index();
  }
};

void broadcast_group(Communicator& comm, const std::vector<at::Tensor>& tensors, int root,
                     int64_t chunk_bytes) {
  size_t i = 0;
  while (i < tensors.size()) {
    // Pack tensors[i..j) so the chunk stays within chunk_bytes (a single larger
    // tensor goes alone).
    const int64_t item = tensors[i].element_size();
    int64_t elements = 0;
    size_t j = i;
    while (j < tensors.size() &&
           (j == i || (elements + tensors[j].numel()) * item <= chunk_bytes)) {
      elements += tensors[j].numel();
      ++j;
    }
    at::Tensor flat = at::empty({elements}, tensors[i].options());
    if (comm.rank() == root) {
      int64_t offset = 0;
      for (size_t k = i; k < j; ++k) {
        flat.narrow(0, offset, tensors[k].numel()).copy_(tensors[k].reshape({-1}));
        offset += tensors[k].numel();
      }
    }
    comm.broadcast(flat, root);
    if (comm.rank() != root) {
      int64_t offset = 0;
      for (size_t k = i; k < j; ++k) {
        tensors[k].copy_(flat.narrow(0, offset, tensors[k].numel()).view(tensors[k].sizes()));
        offset += tensors[k].numel();
      }
    }
    i = j;
  }
}

}  // namespace

std::string shape_text(at::IntArrayRef sizes) {
  std::string text = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(sizes[i]);
  }
  return text + "]";
}

std::vector<NamedTensor> module_tensors(const torch::nn::Module& module) {
  std::vector<NamedTensor> out;
  for (const auto& item : module.named_parameters(/*recurse=*/true))
    out.push_back({item.key(), item.value(), false});
  for (const auto& item : module.named_buffers(/*recurse=*/true))
    out.push_back({item.key(), item.value(), true});
  return out;
}

std::string model_fingerprint(const torch::nn::Module& module) {
  std::string text;
  for (const NamedTensor& t : module_tensors(module)) {
    text += t.is_buffer ? "buffer" : "parameter";
    text += '\t' + t.name + '\t' + dtype_name(t.tensor.scalar_type()) + '\t' +
            shape_text(t.tensor.sizes()) + '\n';
  }
  return text;
}

void check_same_model_across_ranks(Communicator& comm, const torch::nn::Module& module) {
  const std::string fingerprint = model_fingerprint(module);
  const uint64_t hash = fnv1a(fingerprint);
  std::string hash_bytes(sizeof hash, '\0');
  std::memcpy(hash_bytes.data(), &hash, sizeof hash);
  bool same = true;
  for (const std::string& other : comm.all_gather_bytes(hash_bytes)) same = same && other == hash_bytes;
  if (same) return;  // every rank saw the same hashes, so every rank returns here

  const std::vector<std::string> all = comm.all_gather_bytes(fingerprint);
  const std::vector<Entry> ref = parse_fingerprint(all.at(0));
  std::string first;
  size_t total = 0;
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    const std::vector<std::string> diffs = differences(ref, parse_fingerprint(all[r]));
    if (first.empty() && !diffs.empty()) first = "rank " + std::to_string(r) + ": " + diffs.front();
    total += diffs.size();
  }
  if (first.empty()) first = "fingerprints differ";  // hash collision on equal text cannot happen
  std::string message = "model differs across ranks: " + first;
  if (total > 1) message += " (and " + std::to_string(total - 1) + " more difference" +
                            (total > 2 ? "s" : "") + ")";
  message += "; every rank must build the same model (same code, config and dtype)";
  MPIACCEL_THROW(message);
}

void broadcast_tensors(Communicator& comm, const std::vector<at::Tensor>& tensors, int root,
                       int64_t chunk_bytes) {
  if (comm.size() == 1) return;
  MPIACCEL_CHECK(chunk_bytes > 0, "broadcast_tensors: chunk_bytes must be positive");
  // Ordered map: every rank walks the groups in the same order.
  std::map<GroupKey, std::vector<at::Tensor>> groups;
  for (const at::Tensor& t : tensors)
    if (t.defined() && t.numel() > 0) groups[{t.scalar_type(), t.device()}].push_back(t);
  c10::NoGradGuard no_grad;  // parameters are leaves that require grad
  for (auto& [key, group] : groups) broadcast_group(comm, group, root, chunk_bytes);
}

void broadcast_module_state(Communicator& comm, torch::nn::Module& module, int64_t chunk_bytes) {
  std::vector<at::Tensor> tensors;
  for (const NamedTensor& t : module_tensors(module)) tensors.push_back(t.tensor);
  broadcast_tensors(comm, tensors, 0, chunk_bytes);
}

}  // namespace mpiaccel
