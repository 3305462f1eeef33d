// libFuzzer harness: the plain-text readers of training data on arbitrary bytes — the id
// corpus (ALBERT pretraining), sentencepiece .vocab files, id lines, and aligned translation
// files (the input split in two at the first NUL byte), and the tagged Brown corpus with its
// documents.tsv, through the probing tasks built from it; and a Hugging Face config.json
// (the first part) read by io::read_pretrained_config.
#include <depthlab/data/albert_data.hpp>
#include <depthlab/data/probing.hpp>
#include <depthlab/data/translation.hpp>
#include <depthlab/io/pretrained.hpp>

#include "fuzz_input.hpp"

using namespace depthlab;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const std::string a = fuzz::scratch_path("text_a"), b = fuzz::scratch_path("text_b"),
                             folder = fuzz::scratch_path("hf_folder");
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    const auto [first, second] = fuzz::split_once(in, std::string_view("\0", 1));
    fuzz::write_file(a, first);
    fuzz::write_file(b, second);
    try {
        const data::corpus c = data::read_id_corpus(a);
        (void)c;
    } catch (const depthlab::error&) {
    }
    try {
        const auto pieces = data::read_spm_vocab(a);
        const auto starts = data::word_start_table(pieces);
        if (starts.size() != pieces.size()) fuzz::fail("word_start_table size");
    } catch (const depthlab::error&) {
    }
    try {
        (void)data::read_id_lines(a);
    } catch (const depthlab::error&) {
    }
    try {
        const data::parallel_text p = data::load_parallel(a, b);
        if (p.src.size() != p.tgt.size()) fuzz::fail("load_parallel returned unaligned sides");
    } catch (const depthlab::error&) {
    }
    try {
        const auto docs = data::read_brown_tagged(a, b);
        for (const auto& d : docs)
            for (const auto& sentence : d.sentences) {
                const auto c = data::analyse_clause(sentence);
                const int n = static_cast<int>(sentence.size());
                if (c.main_verb >= n || c.subject_head >= n || c.object_head >= n) fuzz::fail("analyse_clause: an index past the sentence");
            }
        data::probing_config cfg;
        cfg.wc_words = 8;
        for (const auto& t : data::make_probing_tasks(docs, {"all"}, cfg))
            for (const auto* split : {&t.train, &t.dev, &t.test})
                for (const auto& e : *split)
                    if (e.label < 0 || e.label >= static_cast<std::int64_t>(t.classes.size())) fuzz::fail("make_probing_tasks: a label out of range");
    } catch (const depthlab::error&) {
    }
    try {
        std::filesystem::create_directories(folder);
        fuzz::write_file(folder + "/config.json", first);
        const io::pretrained_config c = io::read_pretrained_config(folder);
        if (c.cfg.vocab <= 0 || c.cfg.layer.dim <= 0 || c.cfg.depth <= 0) fuzz::fail("read_pretrained_config: a size that is not positive");
    } catch (const depthlab::error&) {
    }
    return 0;
}
