#pragma once
// Internal: the bundled models as `mpiaccel train` builds and samples them,
// shared with `mpiaccel generate`.

#include <memory>
#include <string>

#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/models.hpp"

namespace mpiaccel::detail {

/// [train] tokenize_from: when data_dir lacks its token files, rank 0 makes
/// them from that text (tokenize_corpus) while the others wait. A failure
/// fails every rank with rank 0's message. Collective.
void prepare_token_files(Accelerator& acc);

/// The bundled model of [train] model, as `mpiaccel train` builds it: seeded
/// alike on every rank, deferred on ranks >= 1 under FSDP's memory-efficient
/// init, and with [model] init_from's weights on rank 0 (prepare gives every
/// rank rank 0's). Collective.
std::shared_ptr<Model> build_builtin_model(Accelerator& acc);

/// [model] init_from: rank 0 copies the Hugging Face weights at `path` into
/// `model` (built from `spec`); a mismatch fails on every rank. Collective.
void init_from_pretrained(Accelerator& acc, Model& model, const ModelSpec& spec, const std::string& path);

/// Seeds each rank for training after the model is prepared: dropout masks
/// differ per data-parallel rank, like independent workers (Trainer::train
/// does it when it prepares the model).
void seed_for_training(Accelerator& acc);

/// What the text model `model` continues `prompt` with: bytes, or through the
/// tokenizer beside a BPE run's token files; made safe for a terminal.
/// Collective under FSDP (every rank calls it alike).
std::string continue_text(Accelerator& acc, Model& model, const std::string& prompt,
                          const GenerateOptions& options);

}  // namespace mpiaccel::detail
