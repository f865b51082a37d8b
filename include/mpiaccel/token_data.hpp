#pragma once
// Token files (memory-mapped uint16/uint32 ids, written by `mpiaccel data
// tokenize` or write_token_file) and the TokenDataset of their windows.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mpiaccel/loader.hpp"

namespace mpiaccel {

// A token file is a 32-byte little-endian header (the 8 bytes "MPIATOKS",
// then version, dtype, count, vocabulary) followed by `count` token ids of
// `dtype`. docs/data_and_models.md has the byte layout.

/// Bytes per token id on disk; the value is the header's dtype field.
enum class TokenDtype : uint32_t { kUint16 = 2, kUint32 = 4 };

inline constexpr char kTokenFileMagic[9] = "MPIATOKS";
inline constexpr uint32_t kTokenFileVersion = 1;
inline constexpr int64_t kTokenFileHeaderBytes = 32;

/// The smallest dtype that holds ids below `vocab_size`.
TokenDtype token_dtype_for(int64_t vocab_size);

/// Writes `tokens` (each in [0, vocab_size)) to `path` as a token file of
/// `dtype` (by default the smallest that fits the vocabulary). Written to
/// `path`.tmp and renamed, so a reader never sees half a file. Throws Error.
void write_token_file(const std::string& path, const std::vector<int64_t>& tokens,
                      int64_t vocab_size);
void write_token_file(const std::string& path, const std::vector<int64_t>& tokens,
                      int64_t vocab_size, TokenDtype dtype);

/// A token file mapped read-only into memory: ranks on one node share its
/// pages through the page cache, and only what is read is paged in. The
/// header is checked on open (magic, version, dtype, vocabulary, count
/// against the file size); each problem is an Error naming the file and
/// what to do. Ids are not scanned on open (a corpus can be many GB); read()
/// checks the ids it returns against the vocabulary.
class TokenFile {
 public:
  explicit TokenFile(const std::string& path);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  const std::string& path() const { return path_; }
  TokenDtype dtype() const { return dtype_; }
  /// Token ids in the file.
  int64_t size() const { return count_; }
  /// Every id is below this (the tokenizer's vocabulary).
  int64_t vocab_size() const { return vocab_size_; }

  /// Ids [start, start + count) as int64 into `out`. Throws on a range outside
  /// the file or an id not below vocab_size().
  void read(int64_t start, int64_t count, int64_t* out) const;
  /// Ids [start, start + count) as a 1-D int64 tensor.
  at::Tensor slice(int64_t start, int64_t count) const;

 private:
  std::string path_;
  TokenDtype dtype_ = TokenDtype::kUint16;
  int64_t count_ = 0;
  int64_t vocab_size_ = 0;
  const unsigned char* map_ = nullptr;  // the whole file, header included
  size_t map_bytes_ = 0;
};

/// Windows of a token file, like TextDataset: sample i is ids
/// [i·seq_len, i·seq_len + seq_len + 1), `input` its first seq_len ids and
/// `target` the same shifted by one, both int64 [seq_len].
class TokenDataset : public Dataset {
 public:
  TokenDataset(std::shared_ptr<const TokenFile> file, int64_t seq_len);
  /// Maps `path` (TokenFile).
  TokenDataset(const std::string& path, int64_t seq_len);

  int64_t size() const override { return size_; }
  Batch get(const std::vector<int64_t>& indices) const override;

  int64_t seq_len() const { return seq_len_; }
  int64_t vocab_size() const { return file_->vocab_size(); }
  const TokenFile& file() const { return *file_; }

 private:
  std::shared_ptr<const TokenFile> file_;
  int64_t seq_len_;
  int64_t size_;
};

}  // namespace mpiaccel
