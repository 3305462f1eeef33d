// The probing tasks of data/probing.hpp: word classes, the clause heuristics on sentences
// of the Brown corpus checked by hand, running text and piece alignment, and the task
// builder's splits and balance.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "depthlab/data/probing.hpp"

using namespace depthlab;

namespace probing_test {

data::tagged_sentence tagged(const std::string& line) {
    data::tagged_sentence s;
    std::stringstream ss(line);
    for (std::string t; ss >> t;) s.push_back(data::split_tagged(t));
    return s;
}

/// A fake sentencepiece: splits at spaces (the space becomes '▁' on the next piece), puts
/// punctuation in its own piece, and cuts words longer than 4 bytes after 3 (ids count up).
std::pair<std::vector<std::string>, std::vector<std::int64_t>> fake_encode(const std::string& text) {
    std::vector<std::string> pieces;
    std::string cur = "\xE2\x96\x81";
    std::size_t letters = 0;
    auto flush = [&] {
        if (letters > 0) pieces.push_back(cur);
        cur.clear();
        letters = 0;
    };
    for (const char c : text) {
        if (c == ' ') {
            flush();
            cur = "\xE2\x96\x81";
        } else if (std::ispunct(static_cast<unsigned char>(c))) {
            flush();
            pieces.push_back(std::string(1, c));
        } else {
            if (letters == 3) {
                pieces.push_back(cur);
                cur.clear();
                letters = 0;
            }
            cur += c;
            ++letters;
        }
    }
    flush();
    std::vector<std::int64_t> ids;
    for (std::size_t i = 0; i < pieces.size(); ++i) ids.push_back(static_cast<std::int64_t>(10 + i));
    return {pieces, ids};
}

}  // namespace probing_test

TEST_CASE("probing: Brown tags map to coarse word classes") {
    using data::word_class;
    CHECK(data::coarse_class("nn") == word_class::noun);
    CHECK(data::coarse_class("np$") == word_class::noun);       // Atlanta's
    CHECK(data::coarse_class("nn-tl") == word_class::noun);     // Jury in a title
    CHECK(data::coarse_class("NNS-HL") == word_class::noun);
    CHECK(data::coarse_class("pp$") == word_class::pronoun);    // his
    CHECK(data::coarse_class("pps+bez") == word_class::pronoun);  // he's
    CHECK(data::coarse_class("vbd") == word_class::verb);
    CHECK(data::coarse_class("md") == word_class::verb);
    CHECK(data::coarse_class("jjt") == word_class::adjective);
    CHECK(data::coarse_class("ql") == word_class::adverb);
    CHECK(data::coarse_class("at") == word_class::determiner);
    CHECK(data::coarse_class("in") == word_class::preposition);
    CHECK(data::coarse_class("cs") == word_class::conjunction);
    CHECK(data::coarse_class("cd") == word_class::number);
    CHECK(data::coarse_class(".") == word_class::punctuation);
    CHECK(data::coarse_class("''") == word_class::punctuation);
    CHECK(data::coarse_class("to") == word_class::other);
    CHECK(data::coarse_class("fw-nn") == word_class::other);
    CHECK(data::split_tagged("1/2/cd").word == "1/2");
    CHECK(data::split_tagged("1/2/cd").tag == "cd");
}

TEST_CASE("probing: main verb, subject and object on hand-checked Brown sentences") {
    using probing_test::tagged;
    // ca01, sentence 1: "The Fulton County Grand Jury said Friday an investigation of ..."
    auto s = tagged("The/at Fulton/np-tl County/nn-tl Grand/jj-tl Jury/nn-tl said/vbd Friday/nr an/at investigation/nn of/in "
                    "Atlanta's/np$ recent/jj primary/nn election/nn produced/vbd ``/`` no/at evidence/nn ''/'' that/cs any/dti "
                    "irregularities/nns took/vbd place/nn ./.");
    auto c = data::analyse_clause(s);
    CHECK(c.main_verb == 5);     // said
    CHECK(c.subject_head == 4);  // Jury
    CHECK(c.object_head == 8);   // the heuristic's object: "Friday an investigation" ends at "of" → investigation
    CHECK(data::tense_of(s[5]) == 0);
    CHECK(data::grammatical_number(s[4]) == 0);
    // ca01, sentence 2: the verb is followed by a preposition: no direct object
    s = tagged("The/at jury/nn further/rbr said/vbd in/in term-end/nn presentments/nns that/cs the/at City/nn-tl ./.");
    c = data::analyse_clause(s);
    CHECK(c.main_verb == 3);
    CHECK(c.subject_head == 1);
    CHECK(c.object_head == -1);
    // a leading subordinate clause: the main clause starts after the comma; a modal has no tense
    s = tagged("If/cs he/pps goes/vbz ,/, they/ppss will/md follow/vb ./.");
    c = data::analyse_clause(s);
    CHECK(c.clause_start == 4);
    CHECK(c.main_verb == 5);
    CHECK(c.subject_head == 4);
    CHECK_FALSE(data::tense_of(s[5]).has_value());
    CHECK(data::grammatical_number(s[4]) == 1);  // they
    // a relative clause before the main verb is skipped, and "be" takes no object
    s = tagged("The/at man/nn who/wps came/vbd yesterday/nr is/bez a/at friend/nn ./.");
    c = data::analyse_clause(s);
    CHECK(c.main_verb == 5);
    CHECK(c.subject_head == 1);
    CHECK(c.object_head == -1);
    CHECK(data::tense_of(s[5]) == 1);
    // existential there: no subject
    s = tagged("There/ex are/ber three/cd dogs/nns ./.");
    c = data::analyse_clause(s);
    CHECK(c.main_verb == 1);
    CHECK(c.existential);
    CHECK(c.subject_head == -1);
    // a plural object; "vb" after "do" is not finite, the auxiliary is the main verb
    s = tagged("They/ppss did/dod not/* see/vb the/at old/jj houses/nns ./.");
    c = data::analyse_clause(s);
    CHECK(c.main_verb == 1);
    CHECK(c.object_head == 6);
    CHECK(data::grammatical_number(s[6]) == 1);
    CHECK(data::tense_of(s[1]) == 0);
    CHECK_FALSE(data::grammatical_number({"you", "ppss"}).has_value());
}

TEST_CASE("probing: running text and piece alignment") {
    const auto s = probing_test::tagged("He/pps said/vbd ,/, ``/`` Go/vb ''/'' ./.");
    const auto t = data::detokenize(s);
    CHECK(t.text == "He said, \"Go\".");
    CHECK(t.offsets == std::vector<std::size_t>{0, 3, 7, 9, 10, 12, 13});
    const std::vector<std::string> words = {"the", "cats", "."}, tags = {"at", "nns", "."};
    const auto a = data::align_pieces(words, tags, probing_test::fake_encode);  // ▁the ▁cat s .
    CHECK(a.ids == std::vector<std::int64_t>{10, 11, 12, 13});
    CHECK(a.piece_word == std::vector<int>{0, 1, 1, 2});
    CHECK(a.first_piece == std::vector<char>{1, 1, 0, 1});
    // an encoder that changes the text (lower-cases it): every word is encoded on its own
    const auto lower = [](const std::string& x) {
        std::string l = x;
        for (auto& ch : l) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        return probing_test::fake_encode(l);
    };
    const auto b = data::align_pieces({"The", "cats"}, {"at", "nns"}, lower);
    CHECK(b.piece_word == std::vector<int>{0, 1, 1});
    CHECK(b.first_piece == std::vector<char>{1, 1, 0});
}

TEST_CASE("probing: tasks are split by document, never use the dev documents, and are balanced") {
    // 3 genres x 4 train documents + 1 dev document each; sentences with both tenses and numbers
    std::vector<data::tagged_document> docs;
    const std::vector<std::string> genres = {"news", "learned", "fiction"};
    int counter = 0;
    for (const auto& g : genres)
        for (int k = 0; k < 5; ++k) {
            data::tagged_document d{g + std::to_string(k), g, k == 4 ? "dev" : "train", {}};
            for (int i = 0; i < 30; ++i, ++counter) {
                const bool plural = counter % 3 == 0, past = counter % 2 == 0;
                std::string line = std::string("The/at ") + (plural ? "juries/nns " : "jury/nn ") + (past ? "saw/vbd " : plural ? "see/vb " : "sees/vbz ") +
                                   "the/at " + (counter % 5 < 2 ? "cities/nns" : "city/nn") + " in/in the/at house/nn";
                if (counter % 4 == 0) line += " ,/, and/cc the/at man/nn took/vbd the/at report/nn";
                d.sentences.push_back(probing_test::tagged(line + " ./."));
            }
            docs.push_back(std::move(d));
        }
    data::probing_config cfg;
    cfg.wc_words = 4;
    cfg.wc_skip_most_frequent = 0;
    const auto tasks = data::make_probing_tasks(docs, {"all"}, cfg);
    REQUIRE(tasks.size() == data::probing_task_names().size());
    for (const auto& t : tasks) {
        CAPTURE(t.name);
        std::set<std::string> train_docs, eval_docs;
        for (const auto& e : t.train) train_docs.insert(e.document);
        for (const auto& e : t.dev) eval_docs.insert(e.document);
        for (const auto& e : t.test) eval_docs.insert(e.document);
        for (const auto& d : eval_docs) CHECK_FALSE(train_docs.contains(d));
        for (const auto* split : {&t.train, &t.dev, &t.test}) {
            std::map<std::int64_t, int> per_class;
            for (const auto& e : *split) {
                CHECK(e.document.back() != '4');  // the pretraining dev documents
                CHECK(e.label >= 0);
                CHECK(e.label < static_cast<std::int64_t>(t.classes.size()));
                ++per_class[e.label];
            }
            if (!split->empty() && t.name != "WC" && t.name != "SentLen") CHECK(per_class.size() == t.classes.size());
            if (t.name != "WC")
                for (const auto& [label, n] : per_class) CHECK(n == per_class.begin()->second);
        }
        if (t.name == "Tense" || t.name == "SubjNum" || t.name == "ObjNum" || t.name == "BShift" || t.name == "CoordInv" || t.name == "Genre")
            CHECK(t.train.size() >= 2);
    }
    // CoordInv: the inverted sentence holds the same words, the second clause first
    const auto& coord = *std::find_if(tasks.begin(), tasks.end(), [](const auto& t) { return t.name == "CoordInv"; });
    const auto inverted = std::find_if(coord.train.begin(), coord.train.end(), [](const auto& e) { return e.label == 1; });
    REQUIRE(inverted != coord.train.end());
    CHECK(inverted->words.front() == "The");
    CHECK(inverted->words[1] == "man");
    CHECK(std::find(inverted->words.begin(), inverted->words.end(), "the") != inverted->words.end());
    CHECK_THROWS_WITH_AS((void)data::make_probing_tasks(docs, {"Nonsense"}, cfg), doctest::Contains("unknown task 'Nonsense'"), usage_error);
    CHECK_THROWS_WITH_AS((void)data::make_probing_tasks(docs, {"all", "Nonsense"}, cfg), doctest::Contains("'all' must be the only task name"), usage_error);
    CHECK_THROWS_WITH_AS((void)data::make_probing_tasks(docs, {"SentLen", "SentLen"}, cfg), doctest::Contains("task 'SentLen' is listed twice"), usage_error);
    data::probing_config few = cfg;
    few.max_train = 1;
    CHECK_THROWS_WITH_AS((void)data::make_probing_tasks(docs, {"Tense"}, few), doctest::Contains("max_train 1 is below the 2 classes of task Tense"),
                         usage_error);
}

TEST_CASE("probing: reading the tagged corpus checks it against documents.tsv") {
    CHECK_THROWS_WITH_AS((void)data::read_brown_tagged("/nonexistent/brown.tagged.txt", "/nonexistent/documents.tsv"), doctest::Contains("documents.tsv"),
                         io_error);
}
