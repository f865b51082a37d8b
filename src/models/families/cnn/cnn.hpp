#pragma once
// The CNN family's parts (cnn_family.cpp registers them and holds its shapes
// in closed form): the model (cnn.cpp).

#include <memory>

#include "mpiaccel/models.hpp"

namespace mpiaccel::detail {

std::shared_ptr<Model> make_cnn(const ModelSpec& spec, const ModelInit& init);

}  // namespace mpiaccel::detail
