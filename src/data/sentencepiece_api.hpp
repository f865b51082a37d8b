#pragma once
// The entry points of libmpiaccel_sentencepiece (src/data/sentencepiece/shim.cpp),
// loaded on first use with dlopen(RTLD_LOCAL | RTLD_DEEPBIND) so that the
// protobuf bundled in Debian's SentencePiece never meets LibTorch's (the shim
// says why).

#include <string>
#include <utility>
#include <vector>

namespace mpiaccel::detail {

struct SentencePieceApi {
  void* (*load)(const std::string* path, std::string* error);
  void (*free)(void* processor);
  int (*vocab_size)(void* processor);
  int (*encode)(void* processor, const char* text, size_t bytes, std::vector<int>* ids,
                std::string* error);
  int (*decode)(void* processor, const std::vector<int>* ids, std::string* text,
                std::string* error);
  void (*piece)(void* processor, int id, std::string* piece, float* score, int* kind);
  int (*train)(const std::string* text,
               const std::vector<std::pair<std::string, std::string>>* args, unsigned seed,
               std::string* model, std::string* error);
};

/// The loaded entry points (loaded once, thread-safe). Throws Error naming the
/// library and the directories searched when it cannot be loaded.
const SentencePieceApi& sentencepiece_api();

}  // namespace mpiaccel::detail
