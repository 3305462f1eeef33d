#!/usr/bin/env python3
"""Turn the Ding dictionary (Debian trans-de-en) into an aligned English-German corpus.

Usage (scripts/fetch-translation calls it; python3 standard library only):
    prepare_translation.py --ding PATH/usr/share/trans/de-en --out .data/translation
        [--direction en-de|de-en] [--seed 20261129] [--test 1000] [--dev 1000]
        [--nlp-corpus DIR --de-corpus DIR]

Input lines look like  `German | sub-entry ... :: English | sub-entry ...`.  `|` separates
aligned sub-entries, `;` alternatives, `{}` `[]` `()` `<>` grammar/usage notes. A pair is
kept when, after the notes are removed and whitespace is normalised, both sides
  * start with an upper-case letter and end in `.`, `!` or `?` (a whole sentence),
  * contain no alternative: no `;` and no `/` (Ding writes "comes/arrives", "gut / schlecht"),
  * contain no placeholder: no `…`/`...`, no `sth.`/`sb.`/`etw.`/`jdn.`/`jdm.`/`jds.`,
  * have balanced brackets (unbalanced notes are dropped with the pair),
and a source sentence is kept once only (the first pair in file order), so that no source
sentence is in two splits. U+2019 (’) becomes ' so that English apostrophes are uniform.

The pairs (in file order) are shuffled with random.Random(seed) and cut into test, dev and
train. Files written to --out: {train,dev,test}.{en,de} (one sentence a line, line i of .en
and .de aligned) and meta.json (counts, direction, seed, source). The direction decides
which side is the source for de-duplication and is recorded in meta.json ("src", "tgt");
the files are named by language either way.

With --nlp-corpus/--de-corpus also mt.{en,de}: the 100k English sentences of npm
nlp-corpus (builds/doc-N.json) aligned with the machine-translated German of npm
de-corpus (same file, same position: [german, md5(english)]); a pair is kept only when
the md5 of the English sentence matches (of its UTF-8 bytes, or, as de-corpus hashed the
non-ASCII sentences, of the low byte of each UTF-16 code unit; ~1% match neither and are
dropped). Sentences that occur in dev/test (either side)
are dropped from mt so that it can be added to training data.
"""
import argparse
import hashlib
import json
import os
import random
import re
import statistics
import sys

NOTE_RE = re.compile(r"\{[^{}]*\}|\[[^\[\]]*\]|\([^()]*\)|<[^<>]*>")
PLACEHOLDER_RE = re.compile(r"…|\.\.\.|\b(?:sth|sb|etw|jdn|jdm|jds|jd)\.")
SPACE_BEFORE_PUNCT_RE = re.compile(r"\s+([.,!?:])")


def strip_notes(s):
    """Remove {..} [..] (..) <..> (nested too); None when brackets do not balance."""
    prev = None
    while prev != s:
        prev = s
        s = NOTE_RE.sub(" ", s)
    if any(c in s for c in "{}[]()<>"):
        return None
    return s


def clean(s):
    s = strip_notes(s)
    if s is None:
        return None
    s = " ".join(s.split())
    s = SPACE_BEFORE_PUNCT_RE.sub(r"\1", s)
    return s.replace("\u2019", "'")


def is_sentence(s):
    return (len(s) >= 2 and s[0].isupper() and s[-1] in ".!?" and ";" not in s and "/" not in s
            and not PLACEHOLDER_RE.search(s))


def read_ding(path):
    """-> (list of (en, de) in file order, statistics dict)."""
    stats = {"lines": 0, "sub_entry_pairs": 0, "misaligned_lines": 0, "sentence_pairs": 0}
    pairs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            stats["lines"] += 1
            sides = line.rstrip("\n").split(" :: ")
            if len(sides) != 2:
                stats["misaligned_lines"] += 1
                continue
            de_subs, en_subs = sides[0].split(" | "), sides[1].split(" | ")
            if len(de_subs) != len(en_subs):
                stats["misaligned_lines"] += 1
                continue
            for de, en in zip(de_subs, en_subs):
                stats["sub_entry_pairs"] += 1
                de, en = clean(de), clean(en)
                if de is None or en is None or not is_sentence(de) or not is_sentence(en):
                    continue
                stats["sentence_pairs"] += 1
                pairs.append((en, de))
    return pairs, stats


def dedupe(pairs, src_index):
    seen, out = set(), []
    for p in pairs:
        if p[src_index] in seen:
            continue
        seen.add(p[src_index])
        out.append(p)
    return out


def write_split(out, name, pairs):
    for lang, i in (("en", 0), ("de", 1)):
        with open(os.path.join(out, f"{name}.{lang}"), "w", encoding="utf-8", newline="\n") as f:
            for p in pairs:
                f.write(p[i] + "\n")


def words_median(pairs, i):
    return statistics.median(len(p[i].split()) for p in pairs) if pairs else 0


def low_bytes(s):
    """The low byte of each UTF-16 code unit: what a JavaScript md5 that does not encode
    to UTF-8 first hashes. de-corpus's digests of non-ASCII sentences are of this form."""
    b = s.encode("utf-16-le")
    return bytes(b[0::2])


def read_mt(nlp_dir, de_dir, exclude):
    """Align nlp-corpus (English) with de-corpus (German) by md5 of the English sentence."""
    en_builds = os.path.join(nlp_dir, "builds")
    de_builds = os.path.join(de_dir, "builds")
    if not os.path.isdir(de_builds):
        de_builds = de_dir
    pairs, stats = [], {"en_sentences": 0, "md5_utf8": 0, "md5_low_bytes": 0, "md5_mismatch": 0, "missing": 0, "excluded": 0}
    n = 0
    while os.path.exists(os.path.join(en_builds, f"doc-{n}.json")):
        with open(os.path.join(en_builds, f"doc-{n}.json"), encoding="utf-8") as f:
            en_doc = json.load(f)
        de_path = os.path.join(de_builds, f"doc-{n}.json")
        de_doc = []
        if os.path.exists(de_path):
            with open(de_path, encoding="utf-8") as f:
                de_doc = json.load(f)
        for j, en in enumerate(en_doc):
            stats["en_sentences"] += 1
            if j >= len(de_doc) or not isinstance(de_doc[j], list) or len(de_doc[j]) < 2:
                stats["missing"] += 1
                continue
            de, digest = de_doc[j][0], de_doc[j][1]
            if hashlib.md5(en.encode("utf-8")).hexdigest() == digest:
                stats["md5_utf8"] += 1
            elif hashlib.md5(low_bytes(en)).hexdigest() == digest:
                stats["md5_low_bytes"] += 1
            else:
                stats["md5_mismatch"] += 1
                continue
            en1, de1 = " ".join(en.split()), " ".join(str(de).split())
            if not en1 or not de1:
                continue
            if en1 in exclude or de1 in exclude:
                stats["excluded"] += 1
                continue
            pairs.append((en1, de1))
        n += 1
    stats["files"] = n
    return pairs, stats


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ding", required=True, help="path of usr/share/trans/de-en")
    ap.add_argument("--out", required=True)
    ap.add_argument("--direction", choices=["en-de", "de-en"], default="en-de")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--test", type=int, default=1000)
    ap.add_argument("--dev", type=int, default=1000)
    ap.add_argument("--nlp-corpus", help="unpacked npm nlp-corpus package folder")
    ap.add_argument("--de-corpus", help="unpacked npm de-corpus package folder")
    ap.add_argument("--source-sha256", default="", help="recorded in meta.json")
    a = ap.parse_args(argv)

    src, tgt = a.direction.split("-")
    pairs, stats = read_ding(a.ding)
    unique = dedupe(pairs, 0 if src == "en" else 1)
    stats["unique_source_pairs"] = len(unique)
    if len(unique) < a.test + a.dev + 1:
        sys.exit(f"prepare_translation: only {len(unique)} pairs, fewer than test + dev + 1")
    order = list(range(len(unique)))
    random.Random(a.seed).shuffle(order)
    shuffled = [unique[i] for i in order]
    splits = {"test": shuffled[:a.test], "dev": shuffled[a.test:a.test + a.dev], "train": shuffled[a.test + a.dev:]}

    os.makedirs(a.out, exist_ok=True)
    meta = {"source": "Debian trans-de-en 1.9-6 (Ding, GPL-2+)", "source_sha256": a.source_sha256,
            "direction": a.direction, "src": src, "tgt": tgt, "seed": a.seed, "filter": stats, "splits": {}}
    for name, ps in splits.items():
        write_split(a.out, name, ps)
        meta["splits"][name] = {"pairs": len(ps), "median_words_en": words_median(ps, 0),
                                "median_words_de": words_median(ps, 1)}
        print(f"{name:5s} {len(ps):6d} pairs   median words en {words_median(ps, 0):g}  de {words_median(ps, 1):g}")

    if a.nlp_corpus or a.de_corpus:
        if not (a.nlp_corpus and a.de_corpus):
            sys.exit("prepare_translation: --nlp-corpus and --de-corpus go together")
        exclude = {s for name in ("dev", "test") for p in splits[name] for s in p}
        mt, mt_stats = read_mt(a.nlp_corpus, a.de_corpus, exclude)
        write_split(a.out, "mt", mt)
        meta["mt"] = {"pairs": len(mt), "stats": mt_stats, "median_words_en": words_median(mt, 0),
                      "median_words_de": words_median(mt, 1),
                      "source": "npm nlp-corpus@4.4.0 + de-corpus@0.0.1 (machine-translated German)"}
        print(f"mt    {len(mt):6d} pairs   ({mt_stats})")

    with open(os.path.join(a.out, "meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"filter: {stats}")
    print(f"direction {a.direction}; wrote {a.out}/{{train,dev,test}}.{{en,de}} and meta.json")


if __name__ == "__main__":
    main()
