// Shape-only builds' dispatch state (no_computation.hpp).

#include "models/no_computation.hpp"

namespace mpiaccel::detail {
namespace {

thread_local const NoComputation* innermost = nullptr;

}  // namespace

NoComputation::NoComputation() : saved_(c10::impl::tls_local_dispatch_key_set()), outer_(innermost) {
  innermost = this;
  c10::impl::tls_set_dispatch_key_included(c10::DispatchKey::Meta, true);
}

NoComputation::~NoComputation() {
  c10::impl::_force_tls_local_dispatch_key_set(saved_);
  innermost = outer_;
}

const NoComputation* NoComputation::current() { return innermost; }

ComputeHere::ComputeHere() {
  if (NoComputation::current() == nullptr) return;
  inside_ = c10::impl::tls_local_dispatch_key_set();
  c10::impl::_force_tls_local_dispatch_key_set(NoComputation::current()->saved());
}

ComputeHere::~ComputeHere() {
  if (inside_) c10::impl::_force_tls_local_dispatch_key_set(*inside_);
}

}  // namespace mpiaccel::detail
