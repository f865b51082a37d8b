#pragma once
// A communicator carried through an autograd function's context (as an
// IValue capsule) to its backward.

#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/custom_function.h>

#include <memory>
#include <utility>

#include "mpiaccel/comm.hpp"

namespace mpiaccel::tp::detail {

struct GroupCapsule : torch::CustomClassHolder {
  explicit GroupCapsule(std::shared_ptr<Communicator> g) : group(std::move(g)) {}
  std::shared_ptr<Communicator> group;

  static c10::intrusive_ptr<GroupCapsule> of(const std::shared_ptr<Communicator>& g) {
    return c10::make_intrusive<GroupCapsule>(g);
  }
  /// The group saved as ctx->saved_data["group"].
  static Communicator* from(torch::autograd::AutogradContext* ctx) {
    return c10::static_intrusive_pointer_cast<GroupCapsule>(ctx->saved_data.at("group").toCapsule())->group.get();
  }
};

}  // namespace mpiaccel::tp::detail
