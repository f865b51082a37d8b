#pragma once
// Constructors of the model families, one per source file, so that the
// factory (model.cpp) does not compile every family's module headers.

#include <memory>

#include "mpiaccel/models.hpp"

namespace mpiaccel::detail {

std::shared_ptr<Model> make_gpt(const ModelSpec& spec, const ModelInit& init);
std::shared_ptr<Model> make_llama(const ModelSpec& spec, const ModelInit& init);
std::shared_ptr<Model> make_mlp(const ModelSpec& spec, const ModelInit& init);
std::shared_ptr<Model> make_cnn(const ModelSpec& spec, const ModelInit& init);

}  // namespace mpiaccel::detail
