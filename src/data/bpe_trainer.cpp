// Training a BPE SentencePiece model on a text (train_bpe_tokenizer).
//
// The options make the model lossless on valid UTF-8 text (SentencePiece
// replaces invalid sequences with U+FFFD), which a language model's data
// needs: byte_fallback (a byte that is no piece becomes <0xNN>), the
// identity normaliser, no whitespace folding and no dummy prefix (so encoding
// pieces of a text one after another gives the ids of the whole), and newline
// as a user-defined piece (SentencePiece trains on lines, which would
// otherwise never contain one).

#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "data/sentencepiece_api.hpp"
#include "mpiaccel/tokenizer.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel {

void train_bpe_tokenizer(const std::string& text, const std::string& model_path,
                         const BpeTrainOptions& options) {
  MPIACCEL_CHECK(!text.empty(), "train_bpe_tokenizer: no text to train on");
  // 256 byte pieces, <unk> and newline come before any merge.
  MPIACCEL_CHECK(options.vocab_size >= 260 && options.vocab_size <= (int64_t{1} << 20),
                 "tokenizer vocabulary " + std::to_string(options.vocab_size) +
                     " is not in [260, 1048576] (byte fallback alone takes 258 pieces)");
  const std::vector<std::pair<std::string, std::string>> args = {
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"byte_fallback", "true"},
      {"character_coverage", "0.9995"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"split_digits", "true"},
      {"user_defined_symbols", "\n"},
      {"bos_id", "-1"},
      {"eos_id", "-1"},
      {"num_threads", std::to_string(options.num_threads)},
      {"input_sentence_size", std::to_string(options.max_sentences)},
      {"shuffle_input_sentence", "true"},
      {"max_sentence_length", "16384"},
      {"minloglevel", "1"},  // SentencePiece's INFO lines are many and say little
  };
  std::string model;
  std::string error;
  MPIACCEL_CHECK(detail::sentencepiece_api().train(&text, &args, options.seed, &model, &error) == 0,
                 "cannot train the BPE tokenizer: " + error);

  // Written here (temp file + rename) rather than by SentencePiece's
  // model_prefix, so a reader never sees half a model.
  const std::string tmp = model_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(model.data(), static_cast<std::streamsize>(model.size()));
    out.close();
    MPIACCEL_CHECK(!out.fail(), "cannot write " + tmp);
  }
  MPIACCEL_CHECK(std::rename(tmp.c_str(), model_path.c_str()) == 0,
                 "cannot rename " + tmp + " to " + model_path);
}

}  // namespace mpiaccel
