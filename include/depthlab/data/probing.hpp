#pragma once
// Probing and classification tasks from the tagged Brown corpus (the first study's section 3,
// ../shared/papers.md §A.3), in the SentEval style: SentLen, WC, BShift, Tense, SubjNum,
// ObjNum, CoordInv (sentence level), Genre (chunks of documents), and per-word labels (a
// coarse word class, "main verb", "subject head") for the depth-by-word analysis.
//
// Everything here works on words and Brown tags; the tokenizer is the caller's (see
// align_pieces). The syntactic heuristics read the tags only — no parser — and are written
// down where they are defined (docs/probing.md has the same text with examples):
//   * main clause: a sentence that opens with a subordinator (tag cs, wrb, or a wh-word)
//     starts its main clause after the first comma; otherwise at the first word.
//   * main verb: the first finite verb of the main clause (finite: vbd vbz md and the
//     be/have/do forms bed bedz bem ber bez hvd hvz hv dod doz do, and vb when no modal, "to"
//     or auxiliary precedes it within two words), skipping one finite verb for every relative
//     or complement clause opened (wdt, wps, wpo, cs) between the clause start and it. The
//     finite auxiliary is the main verb ("had gone": had), so its tag carries the tense.
//   * subject head: the last noun or pronoun of the first noun group of the main clause
//     before the main verb; the group ends at a preposition, a wh-word, a comma, a
//     conjunction or a verb. None when the clause has existential "there" (ex).
//   * object head: the last noun or pronoun of the noun group that directly follows the
//     main verb and its verbal/adverb chain (hv/be/do forms, vb*, rb, "not"); none after a
//     form of "be" (a predicate, not an object) or when a preposition comes first.
// Number: nns nps nrs (and "we", "they", "them", "us") are plural; nn np nr pn pps and
// singular object pronouns are singular; "I", "you" are not counted.
#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "depthlab/core/error.hpp"
#include "depthlab/core/rng.hpp"

namespace depthlab::data {

// ------------------------------------------------------------------------------ corpus

struct tagged_word {
    std::string word, tag;  // tag: Brown's, lower case, as in the file (may carry -tl, -hl, +)
};
using tagged_sentence = std::vector<tagged_word>;

struct tagged_document {
    std::string id, genre, split;  // from documents.tsv (split: train / dev of the pretraining corpus)
    std::vector<tagged_sentence> sentences;
};

/// `word/tag` → {word, tag}; the word may itself hold '/' (1/2/cd), so the last one splits.
[[nodiscard]] inline tagged_word split_tagged(std::string_view token) {
    const auto cut = token.rfind('/');
    if (cut == std::string_view::npos || cut == 0) return {std::string(token), "nil"};
    return {std::string(token.substr(0, cut)), std::string(token.substr(cut + 1))};
}

/// Reads brown.tagged.txt (one sentence per line, documents separated by blank lines, in the
/// order of documents.tsv's brown rows) with documents.tsv (source, id, split, sentences,
/// words, info = genre). io_error naming the path and line when the two disagree.
[[nodiscard]] inline std::vector<tagged_document> read_brown_tagged(const std::string& tagged_path, const std::string& documents_tsv) {
    std::vector<tagged_document> docs;
    {
        std::ifstream f(documents_tsv);
        DEPTHLAB_CHECK(f.good(), io_error, "read_brown_tagged: cannot open '", documents_tsv, "'");
        std::string line;
        std::getline(f, line);  // header
        for (std::size_t n = 2; std::getline(f, line); ++n) {
            std::vector<std::string> cols;
            std::stringstream ss(line);
            for (std::string c; std::getline(ss, c, '\t');) cols.push_back(c);
            DEPTHLAB_CHECK(cols.size() >= 5, io_error, "read_brown_tagged: '", documents_tsv, "' line ", n, ": expected 6 tab-separated columns, got ",
                           cols.size());
            if (cols[0] != "brown") continue;
            docs.push_back({cols[1], cols.size() > 5 ? cols[5] : "", cols[2], {}});
        }
    }
    std::ifstream f(tagged_path);
    DEPTHLAB_CHECK(f.good(), io_error, "read_brown_tagged: cannot open '", tagged_path, "'");
    std::size_t d = 0, n = 0;
    bool in_doc = false;
    for (std::string line; std::getline(f, line);) {
        ++n;
        std::stringstream ss(line);
        tagged_sentence s;
        for (std::string tok; ss >> tok;) s.push_back(split_tagged(tok));
        if (s.empty()) {
            if (in_doc) ++d;
            in_doc = false;
            continue;
        }
        DEPTHLAB_CHECK(d < docs.size(), io_error, "read_brown_tagged: '", tagged_path, "' line ", n, " starts document ", d + 1, " but '",
                       documents_tsv, "' lists ", docs.size(), " Brown documents");
        docs[d].sentences.push_back(std::move(s));
        in_doc = true;
    }
    if (in_doc) ++d;
    DEPTHLAB_CHECK(d == docs.size(), io_error, "read_brown_tagged: '", tagged_path, "' holds ", d, " documents, '", documents_tsv, "' lists ",
                   docs.size());
    return docs;
}

/// The word as it appears in the running text (Brown's `` and '' are double quotes).
[[nodiscard]] inline std::string surface(const tagged_word& w) { return w.word == "``" || w.word == "''" ? "\"" : w.word; }

/// The sentence as running text, with the pretraining corpus' spacing rules
/// (scripts/prepare_english.py: punctuation attaches left, brackets and quotes right), and
/// each word's byte offset in it (words glued to a neighbour still get their own offset).
struct sentence_text {
    std::string text;
    std::vector<std::size_t> offsets;
};
[[nodiscard]] inline sentence_text detokenize(const tagged_sentence& s) {
    static const std::set<std::string, std::less<>> attach_left = {",", ".", ";", ":", "!", "?", ")", "]", "}", "'", "''", "'s", "n't", "...", "%"};
    static const std::set<std::string, std::less<>> attach_right = {"(", "[", "{", "``", "$"};
    sentence_text r;
    bool glue_next = false;
    for (const auto& w : s) {
        if (!r.text.empty() && !glue_next && !attach_left.contains(w.word)) r.text += ' ';
        r.offsets.push_back(r.text.size());
        r.text += surface(w);
        glue_next = attach_right.contains(w.word);
    }
    return r;
}

// ------------------------------------------------------------------------------ word classes

enum class word_class : std::uint8_t { noun, verb, adjective, adverb, pronoun, determiner, preposition, conjunction, number, punctuation, other };
inline constexpr int word_class_count = 11;
[[nodiscard]] inline const char* to_string(word_class c) {
    static constexpr std::array<const char*, word_class_count> names = {"noun", "verb", "adjective", "adverb", "pronoun", "determiner",
                                                                        "preposition", "conjunction", "number", "punctuation", "other"};
    return names[static_cast<std::size_t>(c)];
}

/// Brown tag without its decorations: lower case, no -tl/-hl/-nc suffix, no fw- prefix
/// (foreign words keep "fw"), the first part of a contraction (pps+bez → pps).
[[nodiscard]] inline std::string base_tag(std::string_view tag) {
    std::string t(tag);
    for (auto& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (t.starts_with("fw-")) return "fw";
    if (const auto plus = t.find('+'); plus != std::string::npos && plus > 0) t.resize(plus);
    for (const std::string_view suffix : {"-tl", "-hl", "-nc"})
        while (t.size() > suffix.size() && t.ends_with(suffix)) t.resize(t.size() - suffix.size());
    return t;
}

[[nodiscard]] inline bool is_possessive(std::string_view base) { return base.size() > 1 && base.back() == '$'; }

/// The coarse class of a Brown tag (the mapping is the table below; possessives go with
/// their noun or pronoun).
[[nodiscard]] inline word_class coarse_class(std::string_view tag) {
    std::string t = base_tag(tag);
    if (t.empty()) return word_class::other;
    if (!std::isalpha(static_cast<unsigned char>(t[0]))) return word_class::punctuation;  // . , : ( ) -- '' `` ' *
    if (t == "pp$" || t == "pp$$" || t == "wp$") return word_class::pronoun;
    while (t.size() > 1 && t.back() == '$') t.pop_back();
    static const std::map<std::string, word_class, std::less<>> table = {
        {"nn", word_class::noun},         {"nns", word_class::noun},        {"np", word_class::noun},         {"nps", word_class::noun},
        {"nr", word_class::noun},         {"nrs", word_class::noun},        {"vb", word_class::verb},         {"vbd", word_class::verb},
        {"vbg", word_class::verb},        {"vbn", word_class::verb},        {"vbz", word_class::verb},        {"be", word_class::verb},
        {"bed", word_class::verb},        {"bedz", word_class::verb},       {"beg", word_class::verb},        {"bem", word_class::verb},
        {"ben", word_class::verb},        {"ber", word_class::verb},        {"bez", word_class::verb},        {"do", word_class::verb},
        {"dod", word_class::verb},        {"doz", word_class::verb},        {"hv", word_class::verb},         {"hvd", word_class::verb},
        {"hvg", word_class::verb},        {"hvn", word_class::verb},        {"hvz", word_class::verb},        {"md", word_class::verb},
        {"jj", word_class::adjective},    {"jjr", word_class::adjective},   {"jjs", word_class::adjective},   {"jjt", word_class::adjective},
        {"rb", word_class::adverb},       {"rbr", word_class::adverb},      {"rbt", word_class::adverb},      {"rn", word_class::adverb},
        {"rp", word_class::adverb},       {"ql", word_class::adverb},       {"qlp", word_class::adverb},      {"wrb", word_class::adverb},
        {"pn", word_class::pronoun},      {"ppl", word_class::pronoun},     {"ppls", word_class::pronoun},    {"ppo", word_class::pronoun},
        {"pps", word_class::pronoun},     {"ppss", word_class::pronoun},    {"wps", word_class::pronoun},     {"wpo", word_class::pronoun},
        {"ex", word_class::pronoun},      {"at", word_class::determiner},   {"ap", word_class::determiner},   {"abn", word_class::determiner},
        {"abx", word_class::determiner},  {"abl", word_class::determiner},  {"dt", word_class::determiner},   {"dti", word_class::determiner},
        {"dts", word_class::determiner},  {"dtx", word_class::determiner},  {"wdt", word_class::determiner},  {"in", word_class::preposition},
        {"cc", word_class::conjunction},  {"cs", word_class::conjunction},  {"cd", word_class::number},       {"od", word_class::number},
    };
    const auto it = table.find(t);
    return it == table.end() ? word_class::other : it->second;  // to, uh, fw, nil, *
}

// ------------------------------------------------------------------------------ clause heuristics

/// What the tag heuristics find in a sentence (word indices; -1: not found).
struct clause_analysis {
    int clause_start = 0, main_verb = -1, subject_head = -1, object_head = -1;
    bool existential = false;  // the main clause has existential "there"
};

namespace probing_detail {
inline bool in(std::string_view t, std::initializer_list<std::string_view> set) { return std::find(set.begin(), set.end(), t) != set.end(); }
inline bool finite_tag(std::string_view t) {
    return in(t, {"vbd", "vbz", "md", "bed", "bedz", "bem", "ber", "bez", "hvd", "hvz", "hv", "dod", "doz", "do"});
}
inline bool opens_clause(std::string_view t) { return in(t, {"wdt", "wps", "wpo", "cs"}); }
inline bool nominal(std::string_view t) { return !is_possessive(t) && in(t, {"nn", "nns", "np", "nps", "nr", "nrs", "pn", "pps", "ppss", "ppo"}); }
inline bool np_word(std::string_view t) {  // may stand inside a noun group
    return nominal(t) || is_possessive(t) || in(t, {"at", "ap", "abn", "dt", "dti", "dts", "dtx", "jj", "jjr", "jjs", "jjt", "cd", "od", "ql", "pp$"});
}
}  // namespace probing_detail

/// The heuristics of the file comment, on one sentence.
[[nodiscard]] inline clause_analysis analyse_clause(const tagged_sentence& s) {
    using namespace probing_detail;
    clause_analysis r;
    const int n = static_cast<int>(s.size());
    std::vector<std::string> t(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) t[static_cast<std::size_t>(i)] = base_tag(s[static_cast<std::size_t>(i)].tag);
    auto tag = [&](int i) -> const std::string& { return t[static_cast<std::size_t>(i)]; };
    if (n > 0 && (in(tag(0), {"cs", "wrb", "wdt", "wps"}))) {
        r.clause_start = -1;
        for (int i = 1; i < n; ++i)
            if (tag(i) == ",") {
                r.clause_start = i + 1;
                break;
            }
        if (r.clause_start < 0 || r.clause_start >= n) return r;
    }
    int pending = 0;  // clauses opened and not yet closed by their own finite verb
    for (int i = r.clause_start; i < n; ++i) {
        const auto& ti = tag(i);
        if (ti == "ex") r.existential = true;
        if (opens_clause(ti) && i > r.clause_start) ++pending;
        bool finite = finite_tag(ti);
        if (ti == "vb") {
            finite = true;
            for (int j = std::max(r.clause_start, i - 2); j < i; ++j)
                if (in(tag(j), {"md", "to", "do", "dod", "doz", "hv", "hvd", "hvz", "be", "bed", "bedz", "bem", "ber", "bez"})) finite = false;
        }
        if (!finite) continue;
        if (pending > 0) {
            --pending;
            continue;
        }
        r.main_verb = i;
        break;
    }
    if (r.main_verb < 0) return r;
    // subject: the first noun group before the verb
    if (!r.existential) {
        bool started = false;
        for (int i = r.clause_start; i < r.main_verb; ++i) {
            const auto& ti = tag(i);
            const bool stop = ti == "in" || ti == "," || ti == "cc" || opens_clause(ti) || coarse_class(ti) == word_class::verb;
            if (started && (stop || !np_word(ti))) break;
            if (np_word(ti)) started = true;
            if (nominal(ti)) r.subject_head = i;
        }
    }
    // object: the noun group right after the verb and its verbal chain
    int i = r.main_verb;
    bool be_form = tag(i).starts_with("be");
    for (++i; i < n; ++i) {
        const auto& ti = tag(i);
        if (coarse_class(ti) == word_class::verb || in(ti, {"rb", "*"})) {
            if (ti.starts_with("be")) be_form = true;
            else if (coarse_class(ti) == word_class::verb) be_form = false;  // "was given": the lexical verb decides
            continue;
        }
        break;
    }
    if (be_form) return r;
    for (; i < n && np_word(tag(i)); ++i)
        if (nominal(tag(i))) r.object_head = i;
    return r;
}

/// 0 singular, 1 plural, nullopt: not counted (the file comment's rule).
[[nodiscard]] inline std::optional<int> grammatical_number(const tagged_word& w) {
    const std::string t = base_tag(w.tag);
    std::string lw = w.word;
    for (auto& c : lw) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (t == "nns" || t == "nps" || t == "nrs") return 1;
    if (t == "nn" || t == "np" || t == "nr" || t == "pn" || t == "pps") return 0;
    if (t == "ppss" || t == "ppo") {
        if (lw == "we" || lw == "they" || lw == "them" || lw == "us") return 1;
        if (lw == "him" || lw == "her" || lw == "it" || lw == "me") return 0;
    }
    return std::nullopt;
}

/// 0 past, 1 present, nullopt: a modal (no tense in the tag).
[[nodiscard]] inline std::optional<int> tense_of(const tagged_word& verb) {
    const std::string t = base_tag(verb.tag);
    if (probing_detail::in(t, {"vbd", "bed", "bedz", "hvd", "dod"})) return 0;
    if (probing_detail::in(t, {"vbz", "vb", "bem", "ber", "bez", "hvz", "hv", "doz", "do"})) return 1;
    return std::nullopt;
}

// ------------------------------------------------------------------------------ tasks

/// One input of a task: its words, label, and per-word analysis labels.
struct probe_example {
    std::vector<std::string> words;   // running-text order (surface forms: Brown's quotes as ")
    std::vector<std::string> tags;    // Brown's, one per word
    std::int64_t label = 0;
    std::string document;             // Brown document id (splits are by document)
};

struct probe_task {
    std::string name;
    std::vector<std::string> classes;  // label names
    std::vector<probe_example> train, dev, test;
};

struct probing_config {
    std::uint64_t seed = 1;
    double dev_fraction = 0.1, test_fraction = 0.1;  // of the documents (per genre, at least one each)
    int min_words = 5, max_words = 40;               // sentences outside are not used
    int wc_words = 1000;                             // WC: classes (mid-frequency words)
    int wc_skip_most_frequent = 300;                 // WC: candidates start after the most frequent words (at most a quarter of them)
    int wc_max_per_class = 30;                       // WC: examples per word at most (balanced: every word as many)
    int genre_chunk_words = 48;                      // Genre: consecutive sentences up to this many words
    std::int64_t max_train = 20000, max_eval = 2000; // per task and split, after balancing
};

/// Brown genre → the three groups of the Genre task.
[[nodiscard]] inline std::optional<int> genre_group(std::string_view genre) {
    using probing_detail::in;
    if (in(genre, {"news", "editorial", "reviews"})) return 0;                                                     // press
    if (in(genre, {"religion", "hobbies", "lore", "belles_lettres", "government", "learned"})) return 1;           // non-fiction
    if (in(genre, {"fiction", "mystery", "science_fiction", "adventure", "romance", "humor"})) return 2;           // fiction
    return std::nullopt;
}

/// The tasks named (SentLen, WC, BShift, Tense, SubjNum, ObjNum, CoordInv, Genre; "all" for
/// every one) from the documents of the pretraining corpus' train split, split train/dev/test
/// by document (seeded, per genre) and balanced per split (every class present as many
/// examples, the smallest class' count; WC: only capped, at wc_max_per_class).
[[nodiscard]] std::vector<probe_task> make_probing_tasks(const std::vector<tagged_document>& docs, const std::vector<std::string>& names,
                                                         const probing_config& cfg);

/// The known task names, in the order of the report.
[[nodiscard]] inline const std::vector<std::string>& probing_task_names() {
    static const std::vector<std::string> n = {"SentLen", "WC", "BShift", "Tense", "SubjNum", "ObjNum", "CoordInv", "Genre"};
    return n;
}

namespace probing_detail {

inline void shuffle(std::vector<std::size_t>& v, Generator& g) {
    for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[static_cast<std::size_t>(g.below(i))]);
}

inline probe_example example_of(const tagged_sentence& s, std::int64_t label, const std::string& doc) {
    probe_example e;
    e.label = label;
    e.document = doc;
    for (const auto& w : s) {
        e.words.push_back(w.word);
        e.tags.push_back(w.tag);
    }
    return e;
}

/// Downsamples every class to the smallest one's count (at most cap), in a seeded order.
/// Classes the split does not hold at all (a long-sentence bin of a small corpus, a WC word
/// that never occurs alone) are left out rather than emptying the split.
/// equalise = false only caps every class (WC: a thousand words cannot all be frequent).
inline std::vector<probe_example> balance(std::vector<probe_example> xs, std::size_t classes, std::size_t cap, Generator& g, bool equalise = true) {
    std::vector<std::vector<std::size_t>> by(classes);
    for (std::size_t i = 0; i < xs.size(); ++i) by[static_cast<std::size_t>(xs[i].label)].push_back(i);
    std::size_t m = cap;
    for (const auto& b : by)
        if (!b.empty() && equalise) m = std::min(m, b.size());
    std::vector<std::size_t> keep;
    for (auto& b : by) {
        shuffle(b, g);
        keep.insert(keep.end(), b.begin(), b.begin() + static_cast<std::ptrdiff_t>(std::min(m, b.size())));
    }
    shuffle(keep, g);
    std::vector<probe_example> out;
    out.reserve(keep.size());
    for (const auto i : keep) out.push_back(std::move(xs[i]));
    return out;
}

inline std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

}  // namespace probing_detail

inline std::vector<probe_task> make_probing_tasks(const std::vector<tagged_document>& docs, const std::vector<std::string>& names,
                                                  const probing_config& cfg) {
    using namespace probing_detail;
    std::vector<std::string> wanted;
    for (const auto& n : names) {
        if (n == "all") {
            DEPTHLAB_CHECK(names.size() == 1, usage_error, "make_probing_tasks: 'all' must be the only task name (got ", names.size(), " names)");
            wanted = probing_task_names();
            break;
        }
        DEPTHLAB_CHECK(std::find(probing_task_names().begin(), probing_task_names().end(), n) != probing_task_names().end(), usage_error,
                       "make_probing_tasks: unknown task '", n, "' (expected all or SentLen, WC, BShift, Tense, SubjNum, ObjNum, CoordInv, Genre)");
        DEPTHLAB_CHECK(std::find(wanted.begin(), wanted.end(), n) == wanted.end(), usage_error, "make_probing_tasks: task '", n, "' is listed twice");
        wanted.push_back(n);
    }
    // ---- split the documents of the pretraining train split (dev documents never appear)
    Generator g(cfg.seed);
    std::map<std::string, std::vector<std::size_t>> by_genre;
    for (std::size_t i = 0; i < docs.size(); ++i)
        if (docs[i].split == "train") by_genre[docs[i].genre].push_back(i);
    std::vector<int> part(docs.size(), -1);  // 0 train, 1 dev, 2 test
    for (auto& [genre, ids] : by_genre) {
        shuffle(ids, g);
        const auto n = ids.size();
        auto count = [&](double f) { return n >= 3 ? std::max<std::size_t>(1, static_cast<std::size_t>(f * static_cast<double>(n) + 0.5)) : 0; };
        const std::size_t n_test = count(cfg.test_fraction), n_dev = count(cfg.dev_fraction);
        for (std::size_t k = 0; k < n; ++k) part[ids[k]] = k < n_test ? 2 : k < n_test + n_dev ? 1 : 0;
    }
    // ---- WC's vocabulary: mid-frequency words of the train documents
    std::vector<std::string> wc_vocab;
    std::map<std::string, int> wc_index;
    if (std::find(wanted.begin(), wanted.end(), "WC") != wanted.end()) {
        std::map<std::string, std::int64_t> freq;
        for (std::size_t d = 0; d < docs.size(); ++d)
            if (part[d] >= 0)
                for (const auto& s : docs[d].sentences)
                    for (const auto& w : s)
                        if (std::isalpha(static_cast<unsigned char>(w.word[0]))) ++freq[lower(w.word)];
        std::vector<std::pair<std::int64_t, std::string>> ranked;
        for (const auto& [w, c] : freq) ranked.emplace_back(-c, w);
        std::sort(ranked.begin(), ranked.end());
        // (a small corpus skips at most a quarter of its words, so that WC keeps classes)
        const std::size_t skip = std::min(static_cast<std::size_t>(std::max(0, cfg.wc_skip_most_frequent)), ranked.size() / 4);
        for (std::size_t r = skip; r < ranked.size() && wc_vocab.size() < static_cast<std::size_t>(std::max(0, cfg.wc_words)); ++r) {
            wc_index[ranked[r].second] = static_cast<int>(wc_vocab.size());
            wc_vocab.push_back(ranked[r].second);
        }
    }
    std::vector<probe_task> tasks;
    for (const auto& name : wanted) {
        probe_task task;
        task.name = name;
        std::array<std::vector<probe_example>, 3> split;
        auto add = [&](int p, probe_example e) { split[static_cast<std::size_t>(p)].push_back(std::move(e)); };
        Generator tg(cfg.seed ^ std::hash<std::string>{}(name));
        if (name == "Genre") {
            task.classes = {"press", "nonfiction", "fiction"};
            for (std::size_t d = 0; d < docs.size(); ++d) {
                const auto grp = genre_group(docs[d].genre);
                if (part[d] < 0 || !grp) continue;
                tagged_sentence chunk;
                for (const auto& s : docs[d].sentences) {
                    if (!chunk.empty() && static_cast<int>(chunk.size() + s.size()) > cfg.genre_chunk_words) {
                        add(part[d], example_of(chunk, *grp, docs[d].id));
                        chunk.clear();
                    }
                    if (static_cast<int>(s.size()) <= cfg.genre_chunk_words) chunk.insert(chunk.end(), s.begin(), s.end());
                }
                if (static_cast<int>(chunk.size()) >= cfg.min_words) add(part[d], example_of(chunk, *grp, docs[d].id));
            }
        } else {
            if (name == "SentLen") task.classes = {"5-8", "9-12", "13-16", "17-20", "21-25", "26-40"};
            if (name == "WC") task.classes = wc_vocab;
            if (name == "BShift") task.classes = {"original", "bigram_shifted"};
            if (name == "Tense") task.classes = {"past", "present"};
            if (name == "SubjNum" || name == "ObjNum") task.classes = {"singular", "plural"};
            if (name == "CoordInv") task.classes = {"original", "inverted"};
            for (std::size_t d = 0; d < docs.size(); ++d) {
                if (part[d] < 0) continue;
                for (const auto& s : docs[d].sentences) {
                    const int n = static_cast<int>(s.size());
                    if (n < cfg.min_words || n > cfg.max_words) continue;
                    const std::string& id = docs[d].id;
                    if (name == "SentLen") {
                        const int bin = n <= 8 ? 0 : n <= 12 ? 1 : n <= 16 ? 2 : n <= 20 ? 3 : n <= 25 ? 4 : 5;
                        add(part[d], example_of(s, bin, id));
                    } else if (name == "WC") {
                        int found = -1, count = 0;
                        for (const auto& w : s)
                            if (const auto it = wc_index.find(lower(w.word)); it != wc_index.end() && it->second != found) found = it->second, ++count;
                        if (count == 1) add(part[d], example_of(s, found, id));
                    } else if (name == "BShift") {
                        const bool shift = tg.uniform() < 0.5;
                        tagged_sentence x = s;
                        if (shift) {  // two adjacent words (not punctuation, not equal), drawn uniformly
                            std::vector<int> at;
                            for (int i = 0; i + 1 < n; ++i)
                                if (coarse_class(s[i].tag) != word_class::punctuation && coarse_class(s[i + 1].tag) != word_class::punctuation &&
                                    lower(s[i].word) != lower(s[i + 1].word))
                                    at.push_back(i);
                            if (at.empty()) continue;
                            const int i = at[static_cast<std::size_t>(tg.below(at.size()))];
                            std::swap(x[static_cast<std::size_t>(i)], x[static_cast<std::size_t>(i) + 1]);
                        }
                        add(part[d], example_of(x, shift ? 1 : 0, id));
                    } else if (name == "CoordInv") {
                        // exactly one ", and/but/or" whose both sides hold a finite verb and ≥ 3 words
                        int cut = -1, cuts = 0;
                        for (int i = 1; i + 1 < n; ++i)
                            if (s[i].word == "," && base_tag(s[i + 1].tag) == "cc") cut = i, ++cuts;
                        if (cuts != 1) continue;
                        const bool final_punct = coarse_class(s[n - 1].tag) == word_class::punctuation;
                        const int end = final_punct ? n - 1 : n;
                        if (cut < 3 || end - (cut + 2) < 3) continue;
                        auto has_finite = [&](int a, int b) {
                            for (int i = a; i < b; ++i)
                                if (probing_detail::finite_tag(base_tag(s[i].tag))) return true;
                            return false;
                        };
                        if (!has_finite(0, cut) || !has_finite(cut + 2, end)) continue;
                        const bool invert = tg.uniform() < 0.5;
                        tagged_sentence x;
                        if (!invert) x = s;
                        else {  // "A, and B." → "B, and A." with the first letters' case moved along
                            auto recase = [](tagged_word w, bool upper) {
                                if (base_tag(w.tag) != "np" && w.word != "I" && !w.word.empty())
                                    w.word[0] = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(w.word[0]))
                                                                        : std::tolower(static_cast<unsigned char>(w.word[0])));
                                return w;
                            };
                            x.push_back(recase(s[static_cast<std::size_t>(cut + 2)], true));
                            x.insert(x.end(), s.begin() + cut + 3, s.begin() + end);
                            x.push_back(s[static_cast<std::size_t>(cut)]);
                            x.push_back(s[static_cast<std::size_t>(cut + 1)]);
                            x.push_back(recase(s[0], false));
                            x.insert(x.end(), s.begin() + 1, s.begin() + cut);
                            if (final_punct) x.push_back(s[static_cast<std::size_t>(n - 1)]);
                        }
                        add(part[d], example_of(x, invert ? 1 : 0, id));
                    } else {
                        const auto c = analyse_clause(s);
                        std::optional<int> label;
                        if (name == "Tense" && c.main_verb >= 0) label = tense_of(s[static_cast<std::size_t>(c.main_verb)]);
                        if (name == "SubjNum" && c.subject_head >= 0) label = grammatical_number(s[static_cast<std::size_t>(c.subject_head)]);
                        if (name == "ObjNum" && c.object_head >= 0) label = grammatical_number(s[static_cast<std::size_t>(c.object_head)]);
                        if (label) add(part[d], example_of(s, *label, id));
                    }
                }
            }
        }
        const std::size_t k = task.classes.size();
        if (k == 0) {  // WC without candidate words: an empty task (the caller reports it)
            tasks.push_back(std::move(task));
            continue;
        }
        for (const auto& [what, total] : {std::pair{"max_train", cfg.max_train}, std::pair{"max_eval", cfg.max_eval}})
            DEPTHLAB_CHECK(total >= static_cast<std::int64_t>(k), usage_error, "make_probing_tasks: ", what, " ", total, " is below the ", k,
                           " classes of task ", name, ": a balanced split needs at least one example per class");
        const auto cap = [&](std::int64_t total) {
            const auto per = static_cast<std::size_t>(std::max<std::int64_t>(1, total / static_cast<std::int64_t>(k)));
            return name == "WC" ? std::min(per, static_cast<std::size_t>(cfg.wc_max_per_class)) : per;
        };
        const bool equalise = name != "WC";
        task.train = balance(std::move(split[0]), k, cap(cfg.max_train), tg, equalise);
        task.dev = balance(std::move(split[1]), k, cap(cfg.max_eval), tg, equalise);
        task.test = balance(std::move(split[2]), k, cap(cfg.max_eval), tg, equalise);
        tasks.push_back(std::move(task));
    }
    return tasks;
}

// ------------------------------------------------------------------------------ words → pieces

/// A sentence's pieces and where its words start: piece_word[p] = the word of piece p, and
/// first_piece[p] says whether p is that word's first piece (the one its labels go to).
struct aligned_pieces {
    std::vector<std::int64_t> ids;
    std::vector<int> piece_word;
    std::vector<char> first_piece;
};

/// Tokenizes the running text of `words` (detokenize's spacing) with `encode` (text →
/// {pieces, ids} of a sentencepiece model, '▁' marking a space) and assigns each piece to
/// the word its first character belongs to. When the pieces do not spell the text byte for
/// byte (the model normalises something), each word is encoded on its own instead.
template <class Encode>
[[nodiscard]] aligned_pieces align_pieces(const std::vector<std::string>& words, const std::vector<std::string>& tags, Encode&& encode) {
    tagged_sentence s;
    for (std::size_t i = 0; i < words.size(); ++i) s.push_back({words[i], i < tags.size() ? tags[i] : "nil"});
    const sentence_text st = detokenize(s);
    const auto [pieces, piece_ids] = encode(st.text);
    DEPTHLAB_CHECK(pieces.size() == piece_ids.size(), usage_error, "align_pieces: the encoder gave ", pieces.size(), " pieces but ", piece_ids.size(), " ids");
    static constexpr std::string_view space_mark = "\xE2\x96\x81";  // ▁
    aligned_pieces r;
    std::size_t pos = 0;
    bool ok = true;
    int last_word = -1;
    for (std::size_t k = 0; k < pieces.size(); ++k) {
        std::string_view v = pieces[k];
        bool leading_space = false;
        if (v.starts_with(space_mark)) v.remove_prefix(space_mark.size()), leading_space = true;
        if (leading_space && pos < st.text.size() && st.text[pos] == ' ') ++pos;
        if (v.empty()) {  // a bare ▁ piece: belongs to the next word
            r.ids.push_back(piece_ids[k]);
            r.piece_word.push_back(-2);
            r.first_piece.push_back(0);
            continue;
        }
        if (st.text.compare(pos, v.size(), v) != 0) {
            ok = false;
            break;
        }
        const auto w = static_cast<int>(std::upper_bound(st.offsets.begin(), st.offsets.end(), pos) - st.offsets.begin()) - 1;
        r.ids.push_back(piece_ids[k]);
        r.piece_word.push_back(w);
        r.first_piece.push_back(w != last_word);
        last_word = w;
        pos += v.size();
    }
    if (ok && pos == st.text.size()) {
        for (std::size_t p = 0; p < r.piece_word.size(); ++p)  // bare ▁: the following word's first piece
            if (r.piece_word[p] == -2) {
                r.piece_word[p] = p + 1 < r.piece_word.size() ? r.piece_word[p + 1] : last_word;
                r.first_piece[p] = 1;
                if (p + 1 < r.piece_word.size()) r.first_piece[p + 1] = 0;
            }
        return r;
    }
    r = {};
    for (std::size_t i = 0; i < words.size(); ++i) {
        const auto [wp, wid] = encode(surface(s[i]));
        for (std::size_t k = 0; k < wid.size(); ++k) {
            r.ids.push_back(wid[k]);
            r.piece_word.push_back(static_cast<int>(i));
            r.first_piece.push_back(k == 0);
        }
    }
    return r;
}

}  // namespace depthlab::data
