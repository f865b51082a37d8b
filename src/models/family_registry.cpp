// The registry of model families (include/mpiaccel/model_family.hpp): one
// entry per folder of src/models/families, as generated into
// model_family_names.hpp, each registered by detail::NAME_family() in its
// folder.

#include <algorithm>
#include <string>
#include <vector>

#include "model_family_names.hpp"
#include "models/hf_architecture.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/model_family.hpp"

namespace mpiaccel {
namespace detail {

#define MPIACCEL_DECLARE_FAMILY(family) const ModelFamily& family##_family();
MPIACCEL_MODEL_FAMILIES(MPIACCEL_DECLARE_FAMILY)
#undef MPIACCEL_DECLARE_FAMILY

namespace {

std::vector<const ModelFamily*> registered_families() {
#define MPIACCEL_LIST_FAMILY(family) &family##_family(),
  std::vector<const ModelFamily*> families = {MPIACCEL_MODEL_FAMILIES(MPIACCEL_LIST_FAMILY)};
#undef MPIACCEL_LIST_FAMILY
  std::sort(families.begin(), families.end(),
            [](const ModelFamily* a, const ModelFamily* b) { return std::string(a->name) < b->name; });
  return families;
}

}  // namespace

const HfArchitecture& hf_architecture(const std::string& kind) {
  const ModelFamily& family = model_family(kind);
  if (family.hf != nullptr) return *family.hf;
  std::string have;
  for (const ModelFamily* f : model_families())
    if (f->hf != nullptr) have += std::string(have.empty() ? "" : ", ") + f->name + " (" + f->hf->hf_class + ")";
  MPIACCEL_THROW("a " + kind + " model has no Hugging Face architecture here; these have: " + have);
}

const ModelFamily& hf_family_of(const nlohmann::json& theirs, const std::string& where) {
  return hf_family_of(theirs, where, model_families());
}

}  // namespace detail

const std::vector<const ModelFamily*>& model_families() {
  static const std::vector<const ModelFamily*> families = detail::registered_families();
  return families;
}

std::string model_family_names() {
  std::string names;
  for (const ModelFamily* family : model_families()) names += std::string(names.empty() ? "" : ", ") + family->name;
  return names;
}

const ModelFamily& model_family(const std::string& name) {
  for (const ModelFamily* family : model_families())
    if (name == family->name) return *family;
  MPIACCEL_THROW("model '" + name + "' is unknown; accepted: " + model_family_names());
}

}  // namespace mpiaccel
