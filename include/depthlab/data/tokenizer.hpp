#pragma once
// Opt-in: a thin wrapper over the sentencepiece C++ library. NOT included by
// depthlab/depthlab.hpp; a program that includes this header links sentencepiece
// (`pkg-config --cflags --libs sentencepiece`, or the depthlab::sentencepiece target of
// cmake/sentencepiece.cmake). Debian: libsentencepiece-dev.
//
// Models come from scripts/train-tokenizer, which reserves [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3
// [MASK]=4 (no <s>/</s>); special_ids() reads the ids from the model and throws if one is
// missing, so other layouts work too.
#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "depthlab/core/error.hpp"
#include "depthlab/data/albert_data.hpp"

namespace depthlab::data {

class tokenizer {
public:
    /// Loads a .model file; io_error naming the path when it is missing or not a model.
    explicit tokenizer(const std::string& model_path) : path_(model_path) {
        std::error_code ec;
        DEPTHLAB_CHECK(std::filesystem::is_regular_file(model_path, ec), io_error, "tokenizer: cannot open sentencepiece model '",
                       model_path, "' (missing or not a file)");
        sentencepiece::util::Status status;
        try {
            status = sp_->Load(model_path);
        } catch (const std::exception& e) {  // the library's own file reading can throw
            throw io_error(::depthlab::detail::cat("tokenizer: cannot read sentencepiece model '", model_path, "': ", e.what()));
        }
        DEPTHLAB_CHECK(status.ok(), io_error, "tokenizer: '", model_path, "' is not a valid sentencepiece model: ", status.ToString());
        DEPTHLAB_CHECK(sp_->GetPieceSize() > 0, io_error, "tokenizer: '", model_path, "' has an empty vocabulary");
    }

    [[nodiscard]] index_t vocab_size() const { return sp_->GetPieceSize(); }
    [[nodiscard]] const std::string& path() const { return path_; }

    [[nodiscard]] std::vector<std::int32_t> encode(std::string_view text) const {
        std::vector<int> ids;
        const auto status = sp_->Encode(text, &ids);
        DEPTHLAB_CHECK(status.ok(), error, "tokenizer::encode: ", status.ToString());
        return {ids.begin(), ids.end()};
    }
    [[nodiscard]] std::vector<std::string> encode_pieces(std::string_view text) const {
        std::vector<std::string> pieces;
        const auto status = sp_->Encode(text, &pieces);
        DEPTHLAB_CHECK(status.ok(), error, "tokenizer::encode_pieces: ", status.ToString());
        return pieces;
    }
    template <class Int>
    [[nodiscard]] std::string decode(std::span<const Int> ids) const {
        std::vector<int> v;
        v.reserve(ids.size());
        for (const Int id : ids) {
            DEPTHLAB_CHECK(id >= 0 && static_cast<std::int64_t>(id) < vocab_size(), index_error, "tokenizer::decode: id ",
                           static_cast<std::int64_t>(id), " outside the vocabulary [0, ", vocab_size(), ")");
            v.push_back(static_cast<int>(id));
        }
        std::string text;
        const auto status = sp_->Decode(v, &text);
        DEPTHLAB_CHECK(status.ok(), error, "tokenizer::decode: ", status.ToString());
        return text;
    }
    template <class Int>
    [[nodiscard]] std::string decode(const std::vector<Int>& ids) const { return decode(std::span<const Int>(ids)); }

    [[nodiscard]] std::string piece(std::int64_t id) const {
        DEPTHLAB_CHECK(id >= 0 && id < vocab_size(), index_error, "tokenizer::piece: id ", id, " outside [0, ", vocab_size(), ")");
        return sp_->IdToPiece(static_cast<int>(id));
    }
    /// Id of a piece; index_error when the model does not have it (sentencepiece would
    /// silently answer the [UNK] id).
    [[nodiscard]] std::int64_t id(std::string_view piece) const {
        const int i = sp_->PieceToId(piece);
        DEPTHLAB_CHECK(sp_->IdToPiece(i) == piece, index_error, "tokenizer: '", path_, "' has no piece '", piece, "'");
        return i;
    }

    /// The ids of [PAD], [UNK], [CLS], [SEP], [MASK]; throws if one is missing.
    [[nodiscard]] data::special_ids special_ids() const {
        data::special_ids s;
        s.pad = sp_->pad_id();
        DEPTHLAB_CHECK(s.pad >= 0, index_error, "tokenizer: '", path_, "' has no padding piece (train with --pad_id=0)");
        s.unk = sp_->unk_id();
        s.cls = id("[CLS]");
        s.sep = id("[SEP]");
        s.mask = id("[MASK]");
        return s;
    }
    /// Every piece, in id order.
    [[nodiscard]] std::vector<std::string> pieces() const {
        std::vector<std::string> out(static_cast<std::size_t>(vocab_size()));
        for (int i = 0; i < vocab_size(); ++i) out[static_cast<std::size_t>(i)] = sp_->IdToPiece(i);
        return out;
    }
    /// Per id, whether the piece starts a word (ALBERT's rule), for whole-word masking.
    [[nodiscard]] std::vector<std::uint8_t> word_start_table() const { return data::word_start_table(pieces(), special_ids()); }
    /// An albert_data_config for this model (vocab, specials, whole-word starts); the
    /// random replacements are drawn above the largest special id.
    [[nodiscard]] albert_data_config albert_config() const {
        albert_data_config c;
        c.specials = special_ids();
        c.vocab = vocab_size();
        c.random_min = std::max({c.specials.pad, c.specials.unk, c.specials.cls, c.specials.sep, c.specials.mask}) + 1;
        c.word_start = word_start_table();
        return c;
    }

    /// Tokenises a text file (one sentence per line, blank line between documents).
    [[nodiscard]] corpus encode_file(const std::string& path) const {
        std::ifstream in(path, std::ios::binary);
        DEPTHLAB_CHECK(in.good(), io_error, "tokenizer::encode_file: cannot open '", path, "'");
        corpus c;
        std::string line;
        while (std::getline(in, line)) {
            if (line.find_first_not_of(" \t\r") == std::string::npos) {
                c.end_document();
                continue;
            }
            const auto ids = encode(line);
            c.push_sentence(std::span<const std::int32_t>(ids));
        }
        DEPTHLAB_CHECK(!in.bad(), io_error, "tokenizer::encode_file: read error in '", path, "'");
        c.end_document();
        return c;
    }

    /// The underlying processor, for anything not wrapped here.
    [[nodiscard]] const sentencepiece::SentencePieceProcessor& processor() const { return *sp_; }

private:
    std::string path_;
    std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();  // movable
};

}  // namespace depthlab::data
