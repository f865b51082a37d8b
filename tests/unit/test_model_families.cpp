// ctest: links mpiaccel; timeout 120
// The model family registry (include/mpiaccel/model_family.hpp): it holds
// exactly the folders of src/models/families, each family builds a model of
// the default sizes whose kind is its name, runs its declared units, and
// counts its parameters in closed form as the built model has them; the
// config accepts exactly the registered names, and an unknown one is refused
// naming them.
#define BOOST_TEST_MODULE model_families
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "mpiaccel/config.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/estimate.hpp"
#include "mpiaccel/model_family.hpp"
#include "mpiaccel/models.hpp"
#include "test_paths.hpp"

using namespace mpiaccel;

namespace {

std::vector<std::string> registered_names() {
  std::vector<std::string> names;
  for (const ModelFamily* family : model_families()) names.push_back(family->name);
  return names;
}

bool has_module_named(torch::nn::Module& module, const std::string& name) {
  for (const auto& child : module.modules(/*include_self=*/false))
    if (child->name() == name) return true;
  return false;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_registry_holds_the_family_folders) {
  std::vector<std::string> folders;
  for (const auto& entry : std::filesystem::directory_iterator(MPIACCEL_SOURCE_DIR "/src/models/families"))
    if (entry.is_directory()) folders.push_back(entry.path().filename().string());
  std::sort(folders.begin(), folders.end());
  BOOST_TEST(registered_names() == folders, boost::test_tools::per_element());
  BOOST_TEST(folders.size() >= 4u);
}

BOOST_AUTO_TEST_CASE(every_family_builds_and_counts_itself) {
  ModelSpec spec;
  spec.n_layer = 2;
  spec.hidden_size = 64;
  for (const ModelFamily* family : model_families()) {
    BOOST_TEST_CONTEXT(family->name) {
      BOOST_TEST(std::string(family->summary).size() > 10u);
      std::shared_ptr<Model> model = make_model(family->name, spec);
      BOOST_TEST(model->kind() == family->name);
      for (const std::string& unit : family->unit_classes) BOOST_TEST(has_module_named(model->module(), unit), unit);
      BOOST_TEST(model_unit_classes(family->name) == family->unit_classes, boost::test_tools::per_element());
      const ModelFootprint closed = model_footprint(family->name, spec);
      const ModelFootprint counted = count_footprint(*model, family->unit_classes);
      BOOST_TEST(closed.params == counted.params);
      BOOST_TEST((closed.tensors == counted.tensors));
      BOOST_TEST(closed.units == counted.units);
      const at::Tensor input = family->input == ModelFamily::Input::Tokens
                                   ? at::randint(spec.vocab_size, {2, 8}, at::kLong)
                                   : at::randn({2, 1, 28, 28});
      const at::Tensor logits = model->forward(input);
      BOOST_TEST(logits.size(0) == 2);
      BOOST_TEST(activation_bytes(family->name, spec, 2, 4, false) > 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_config_accepts_the_registered_names) {
  Config config;
  BOOST_TEST(config.train.model == default_model_family());
  BOOST_TEST(model_family(config.train.model).name == config.train.model);
  for (const std::string& name : registered_names()) BOOST_CHECK_NO_THROW(config.set("train.model", name));
  try {
    config.set("train.model", "resnet");
    BOOST_FAIL("an unknown family was accepted");
  } catch (const Error& e) {
    for (const std::string& name : registered_names())
      BOOST_TEST(e.message().find(name) != std::string::npos, e.message());
  }
  try {
    model_family("resnet");
    BOOST_FAIL("an unknown family was found");
  } catch (const Error& e) {
    BOOST_TEST(e.message().find("accepted: " + model_family_names()) != std::string::npos, e.message());
  }
}
