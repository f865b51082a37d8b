#pragma once
// The MLP family's parts (mlp_family.cpp registers them and holds its shapes
// in closed form): the model (mlp.cpp).

#include <memory>

#include "mpiaccel/models.hpp"

namespace mpiaccel::detail {

std::shared_ptr<Model> make_mlp(const ModelSpec& spec, const ModelInit& init);

}  // namespace mpiaccel::detail
