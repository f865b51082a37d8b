// Finds and loads libmpiaccel_sentencepiece: next to the library (or program)
// this code is part of, then in ../lib and .. of it, then by the loader's own
// search (RPATH, LD_LIBRARY_PATH).

#include "data/sentencepiece_api.hpp"

#include <dlfcn.h>

#include <filesystem>
#include <string>
#include <vector>

#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {
namespace {

constexpr const char* kShim = "libmpiaccel_sentencepiece.so";

std::vector<std::string> candidates() {
  std::vector<std::string> out;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&sentencepiece_api), &info) != 0 && info.dli_fname != nullptr) {
    const std::filesystem::path self = std::filesystem::path(info.dli_fname).parent_path();
    out.push_back((self / kShim).string());
    // A static libmpiaccel: the program is in bin/ (install) or a folder of
    // the build tree, the module in lib/ or the build tree's root.
    out.push_back((self / ".." / "lib" / kShim).string());
    out.push_back((self / ".." / kShim).string());
  }
  out.emplace_back(kShim);
  return out;
}

template <typename F>
void bind(void* handle, const char* name, F*& out, const std::string& path) {
  out = reinterpret_cast<F*>(dlsym(handle, name));
  MPIACCEL_CHECK(out != nullptr, path + " lacks " + name + ": rebuild mpiaccel");
}

SentencePieceApi load_api() {
  std::string tried;
  for (const std::string& path : candidates()) {
    // RTLD_LOCAL keeps SentencePiece's bundled protobuf out of the global
    // scope (LibTorch's libprotobuf); RTLD_DEEPBIND makes SentencePiece bind
    // to its own copy first.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (handle == nullptr) {
      const char* why = dlerror();
      tried += (tried.empty() ? "" : "; ") + std::string(why != nullptr ? why : path);
      continue;
    }
    SentencePieceApi api{};
    bind(handle, "mpiaccel_spm_load", api.load, path);
    bind(handle, "mpiaccel_spm_free", api.free, path);
    bind(handle, "mpiaccel_spm_vocab_size", api.vocab_size, path);
    bind(handle, "mpiaccel_spm_encode", api.encode, path);
    bind(handle, "mpiaccel_spm_decode", api.decode, path);
    bind(handle, "mpiaccel_spm_piece", api.piece, path);
    bind(handle, "mpiaccel_spm_train", api.train, path);
    return api;  // never closed: models may live until exit
  }
  MPIACCEL_THROW(std::string("cannot load the tokenizer library ") + kShim + " (" + tried +
                 "); it is built and installed beside libmpiaccel, and needs "
                 "libsentencepiece (apt-get install libsentencepiece-dev)");
}

}  // namespace

const SentencePieceApi& sentencepiece_api() {
  static const SentencePieceApi api = load_api();
  return api;
}

}  // namespace mpiaccel::detail
