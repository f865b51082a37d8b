// libmpiaccel_sentencepiece: SentencePiece behind a few extern "C" entry
// points, loaded by src/data/sentencepiece_api.cpp with dlopen(RTLD_LOCAL |
// RTLD_DEEPBIND).
//
// Why a separate, privately loaded library: Debian's libsentencepiece bundles
// protobuf-lite 3.14 and exports its symbols, while LibTorch links the system
// libprotobuf 3.21. Linked into one process the dynamic linker binds both to
// one copy and the process dies at start-up (static initialisers of the other
// version) or on the first model load ("compiled against version 3.14.0 ...
// not compatible with 3.21.12"). Loaded locally with deep binding,
// SentencePiece uses its own protobuf and LibTorch never sees it. The entry
// points pass standard-library types: both sides share the one libstdc++.

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

// The lines of a text (each with its newline), without copying the text.
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(std::string_view text) : text_(text) { advance(); }
  bool done() const override { return done_; }
  void Next() override { advance(); }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void advance() {
    if (next_ >= text_.size()) {
      done_ = true;
      return;
    }
    size_t end = text_.find('\n', next_);
    end = end == std::string_view::npos ? text_.size() : end + 1;
    line_.assign(text_.substr(next_, end - next_));
    next_ = end;
  }

  std::string_view text_;
  size_t next_ = 0;
  std::string line_;
  bool done_ = false;
};

}  // namespace

extern "C" {

// Returns a processor (free with mpiaccel_spm_free) or null with `error` set.
__attribute__((visibility("default"))) void* mpiaccel_spm_load(const std::string* path,
                                                               std::string* error) {
  auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = processor->Load(*path);
  if (!status.ok()) {
    *error = status.ToString();
    return nullptr;
  }
  return processor.release();
}

__attribute__((visibility("default"))) void mpiaccel_spm_free(void* processor) {
  delete static_cast<sentencepiece::SentencePieceProcessor*>(processor);
}

__attribute__((visibility("default"))) int mpiaccel_spm_vocab_size(void* processor) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(processor)->GetPieceSize();
}

// 0 on success; otherwise `error` says why.
__attribute__((visibility("default"))) int mpiaccel_spm_encode(void* processor,
                                                               const char* text, size_t bytes,
                                                               std::vector<int>* ids,
                                                               std::string* error) {
  const auto status = static_cast<sentencepiece::SentencePieceProcessor*>(processor)->Encode(
      std::string_view(text, bytes), ids);
  if (status.ok()) return 0;
  *error = status.ToString();
  return 1;
}

__attribute__((visibility("default"))) int mpiaccel_spm_decode(void* processor,
                                                               const std::vector<int>* ids,
                                                               std::string* text,
                                                               std::string* error) {
  const auto status =
      static_cast<sentencepiece::SentencePieceProcessor*>(processor)->Decode(*ids, text);
  if (status.ok()) return 0;
  *error = status.ToString();
  return 1;
}

// Piece `id`: its text, score and kind (0 normal or user-defined, 1 unknown,
// 2 control, 3 unused, 4 byte).
__attribute__((visibility("default"))) void mpiaccel_spm_piece(void* processor, int id, std::string* piece,
                                                              float* score, int* kind) {
  const auto* p = static_cast<sentencepiece::SentencePieceProcessor*>(processor);
  *piece = p->IdToPiece(id);
  *score = p->GetScore(id);
  *kind = p->IsUnknown(id) ? 1 : p->IsControl(id) ? 2 : p->IsUnused(id) ? 3 : p->IsByte(id) ? 4 : 0;
}

// Trains on the lines of `text` with SentencePiece's `args`; the serialised
// model goes to `model`.
__attribute__((visibility("default"))) int mpiaccel_spm_train(
    const std::string* text, const std::vector<std::pair<std::string, std::string>>* args,
    unsigned seed, std::string* model, std::string* error) {
  sentencepiece::SetRandomGeneratorSeed(seed);
  const std::unordered_map<std::string, std::string> kwargs(args->begin(), args->end());
  LineIterator lines(*text);
  const auto status = sentencepiece::SentencePieceTrainer::Train(kwargs, &lines, model);
  if (status.ok()) return 0;
  *error = status.ToString();
  return 1;
}

}  // extern "C"
