#pragma once
// The tokenizer a checkpoint was trained with, recorded in it and checked wherever a program
// pairs a checkpoint with a data folder's tokenizer (--checkpoint, --resume): ids of another
// tokenizer would read the wrong embedding rows, or fall outside the table, steps later.
//
//     examples::record_vocabulary(ckpt.metadata(), tok.pieces());                 // when training
//     examples::check_vocabulary(ck.metadata(), o.checkpoint, tok.pieces(),     // when loading
//                                o.data + "/spm.model", cfg.vocab);
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include <depthlab/depthlab.hpp>

namespace examples {

/// Writes "vocab.pieces" and "vocab.fingerprint" (data::vocabulary_fingerprint).
inline void record_vocabulary(depthlab::io::metadata_map& m, std::span<const std::string> pieces) {
    m["vocab.pieces"] = std::to_string(pieces.size());
    m["vocab.fingerprint"] = depthlab::data::vocabulary_fingerprint(pieces);
}

/// usage_error unless the tokenizer at `tokenizer_path` (its `pieces`) is the one the
/// checkpoint recorded; a checkpoint without a record (older files) is checked by size:
/// the tokenizer must have exactly `model_vocab` pieces.
inline void check_vocabulary(const depthlab::io::metadata_map& m, const std::string& checkpoint_path,
                             std::span<const std::string> pieces, const std::string& tokenizer_path, std::int64_t model_vocab) {
    const auto n = static_cast<std::int64_t>(pieces.size());
    const auto fp = m.find("vocab.fingerprint");
    const std::string advice = "; use the data folder (and its tokenizer) of the run that wrote the checkpoint";
    if (fp == m.end()) {
        DEPTHLAB_CHECK(n == model_vocab, usage_error, "the tokenizer ", tokenizer_path, " has ", n, " pieces, the model of ",
                       checkpoint_path, " a vocabulary of ", model_vocab, advice);
        return;
    }
    const std::string mine = depthlab::data::vocabulary_fingerprint(pieces);
    const auto recorded = m.find("vocab.pieces");
    DEPTHLAB_CHECK(fp->second == mine, usage_error, "the tokenizer ", tokenizer_path, " (", n, " pieces, fingerprint ", mine,
                   ") is not the one ", checkpoint_path, " was trained with (",
                   recorded == m.end() ? std::string("?") : recorded->second, " pieces, fingerprint ", fp->second, ")", advice);
    DEPTHLAB_CHECK(n <= model_vocab, usage_error, "the tokenizer ", tokenizer_path, " has ", n,
                   " pieces, more than the vocabulary of ", model_vocab, " of the model in ", checkpoint_path);
}

/// check_vocabulary against the checkpoint a --resume will load (<out>/checkpoint.safetensors),
/// before the model is built from the data folder; nothing when there is none yet.
inline void check_resume_vocabulary(const std::string& out, std::span<const std::string> pieces,
                                    const std::string& tokenizer_path, std::int64_t model_vocab) {
    const std::string path = out + "/checkpoint.safetensors";
    if (!std::filesystem::exists(path)) return;
    check_vocabulary(depthlab::io::safetensors_file(path).metadata(), path, pieces, tokenizer_path, model_vocab);
}

}  // namespace examples
