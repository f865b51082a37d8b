// The Mesh: coordinates and the communicators of its groups (mesh.hpp).

#include "mpiaccel/mesh.hpp"

#include <set>
#include <string>

#include "core/host_name.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel {
Mesh::Mesh(std::shared_ptr<Communicator> world, MeshShape shape, std::vector<std::string> within_node)
    : world_(std::move(world)), shape_(std::move(shape)) {
  MPIACCEL_CHECK(world_ != nullptr, "Mesh: no communicator");
  std::set<std::string> names;
  for (const MeshDim& d : shape_.dims) {
    MPIACCEL_CHECK(d.size >= 1 && names.insert(d.name).second && d.name != "dp",
                   "Mesh: dimension '" + d.name + "' of size " + std::to_string(d.size) +
                       " is repeated, reserved or empty");
  }
  MPIACCEL_CHECK(shape_.ranks() == world_->size(),
                 "the mesh " + shape_.describe() + " needs " + std::to_string(shape_.ranks()) +
                     " ranks, but the job has " + std::to_string(world_->size()));
  // Row-major: the last dimension varies fastest.
  int64_t rest = world_->rank();
  coords_.assign(shape_.dims.size(), 0);
  for (size_t i = shape_.dims.size(); i-- > 0;) {
    coords_[i] = rest % shape_.dims[i].size;
    rest /= shape_.dims[i].size;
  }
  for (const MeshDim& d : shape_.dims) group({d.name});
  group({"dp"});
  gradient_group();
  for (const std::string& dim : within_node) check_within_node(dim);
}

Mesh::~Mesh() = default;

int64_t Mesh::coordinate(const std::string& name) const {
  for (size_t i = 0; i < shape_.dims.size(); ++i)
    if (shape_.dims[i].name == name) return coords_[i];
  return 0;
}

std::shared_ptr<Communicator> Mesh::gradient_group() {
  return shape_.size("cp") > 1 ? group({"dp", "cp"}) : dp();
}

std::vector<std::string> Mesh::expand(const std::vector<std::string>& dims) const {
  std::vector<std::string> out;
  for (const std::string& d : dims) {
    if (d == "dp") {
      out.push_back("dp_replicate");
      out.push_back("dp_shard");
    } else {
      out.push_back(d);
    }
  }
  return out;
}

std::shared_ptr<Communicator> Mesh::group(const std::vector<std::string>& dims) {
  const std::vector<std::string> key = expand(dims);
  auto found = groups_.find(key);
  if (found != groups_.end()) return found->second;
  return groups_[key] = split_along(key);
}

// Ranks with equal coordinates outside `dims` form a group, ordered by their
// coordinates along `dims` in the order given.
std::shared_ptr<Communicator> Mesh::split_along(const std::vector<std::string>& dims) {
  int64_t members = 1;
  int64_t key = 0;
  for (const std::string& d : dims) {
    const int64_t size = shape_.size(d);
    members *= size;
    key = key * size + coordinate(d);
  }
  if (members == world_->size()) return world_;  // the whole job: no new communicator
  int64_t color = 0;
  for (size_t i = 0; i < shape_.dims.size(); ++i) {
    bool inside = false;
    for (const std::string& d : dims) inside = inside || d == shape_.dims[i].name;
    color = color * shape_.dims[i].size + (inside ? 0 : coords_[i]);
  }
  return world_->split(static_cast<int>(color), static_cast<int>(key));
}

void Mesh::check_within_node(const std::string& dim) {
  const std::shared_ptr<Communicator> g = group({dim});
  const std::vector<std::string> hosts = g->all_gather_bytes(detail::local_host_name());
  std::string other;
  for (const std::string& h : hosts)
    if (h != hosts.front()) other = h;
  all_ok(*world_, other.empty(),
         "the mesh's " + dim + " group spans nodes " + hosts.front() + " and " + other + " (" +
             shape_.describe() + "); its ranks must share a node: launch whole nodes of ranks, "
             "or make " + dim + " smaller" +
             (dim == "tp" ? ", or set [parallelism] tp_across_nodes = true" : ""));
}

std::string Mesh::describe() const {
  std::string at;
  for (const int64_t c : coords_) at += (at.empty() ? "" : ", ") + std::to_string(c);
  return "mesh " + shape_.describe() + "; rank " + std::to_string(world_->rank()) + " at (" + at + ")";
}

}  // namespace mpiaccel
