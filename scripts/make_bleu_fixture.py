#!/usr/bin/env python3
"""Write tests/fixtures/bleu.json: BLEU / chrF reference values for tests/test_bleu.cpp.

    python3 scripts/make_bleu_fixture.py [--out tests/fixtures/bleu.json] [--require-sacrebleu]

The values come from sacreBLEU 2.x itself when `import sacrebleu` works (the "generator"
field says which). Debian 12 has no python3-sacrebleu; a source checkout works as well:

    PYTHONPATH=/path/to/sacrebleu-checkout python3 scripts/make_bleu_fixture.py --require-sacrebleu

(a git checkout needs a sacrebleu/version.py, which its build writes; its imports of
portalocker, tabulate, colorama and lxml serve only the dataset downloads and the CLI, so
empty stand-in modules on PYTHONPATH do where those are not installed). The committed
fixture was written that way by sacreBLEU 2.6.0.

Without sacreBLEU the stand-in below writes it: an independent, standard-library
implementation of what sacreBLEU 2.x (>= 2.2) does by default, written from its documented
algorithm (mteval-v13a regexes run by Python's `re`, Python's `str.split`, the closest
reference length, clipped counts, 'exp' smoothing; chrF with character order 6, beta 2,
whitespace removed, effective-order averaging; "" a zero-length reference, None an absent
one). Its value over the C++ code is that the tokenisation runs through Python's own regex
engine and string functions, which the C++ reimplements by hand. The stand-in is compared
with sacreBLEU on every run where both are available. Both the stand-in and the C++ code
also reproduce the expected values published in sacreBLEU's own test suite (test_bleu.py,
test_sentence_bleu.py, test_chrf.py), which tests/test_bleu.cpp checks.

A reference of None (JSON null) is sacreBLEU's absent reference; tests/test_bleu.cpp reads
it as "" with `empty_reference::absent`.
"""
import argparse
import json
import math
import re
import sys
from collections import Counter

# --- the stand-in -------------------------------------------------------------------------

_RE_13A = [
    (re.compile(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])"), r" \1 "),
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),
]


def tok13a(line):
    line = line.rstrip()
    for a, b in (("<skipped>", ""), ("-\n", ""), ("\n", " "), ("&quot;", '"'), ("&amp;", "&"),
                 ("&lt;", "<"), ("&gt;", ">")):
        line = line.replace(a, b)
    line = f" {line} "
    for pattern, repl in _RE_13A:
        line = pattern.sub(repl, line)
    return " ".join(line.split())


def word_ngrams(tokens, max_order):
    return Counter(tuple(tokens[i:i + n]) for n in range(1, max_order + 1) for i in range(len(tokens) - n + 1))


def bleu_stats(hyp, refs, order=4):
    refs = [r for r in refs if r is not None]
    if not refs:
        raise ValueError("no reference")
    ref_counts, ref_lens = Counter(), []
    for r in refs:
        toks = tok13a(r).split()
        ref_lens.append(len(toks))
        for g, c in word_ngrams(toks, order).items():
            ref_counts[g] = max(ref_counts[g], c)
    htoks = tok13a(hyp).split()
    hyp_len = len(htoks)
    closest = min(ref_lens, key=lambda l: (abs(l - hyp_len), l))
    correct, total = [0] * order, [0] * order
    for g, c in word_ngrams(htoks, order).items():
        total[len(g) - 1] += c
        correct[len(g) - 1] += min(c, ref_counts.get(g, 0))
    return [hyp_len, closest] + correct + total


def bleu_from_stats(st, order=4, effective_order=False):
    sys_len, ref_len = st[0], st[1]
    correct, total = st[2:2 + order], st[2 + order:]
    bp = 1.0 if sys_len >= ref_len else (math.exp(1 - ref_len / sys_len) if sys_len > 0 else 0.0)
    prec = [0.0] * order
    if not any(correct):
        return dict(score=0.0, precisions=prec, bp=bp, counts=correct, totals=total, sys_len=sys_len, ref_len=ref_len)
    smooth, eff = 1.0, order
    for n in range(1, order + 1):
        if total[n - 1] == 0:
            break
        if effective_order:
            eff = n
        if correct[n - 1] == 0:
            smooth *= 2
            prec[n - 1] = 100.0 / (smooth * total[n - 1])
        else:
            prec[n - 1] = 100.0 * correct[n - 1] / total[n - 1]
    logs = [math.log(p) if p != 0.0 else -9999999999 for p in prec[:eff]]
    score = bp * math.exp(sum(logs) / eff)
    return dict(score=score, precisions=prec, bp=bp, counts=correct, totals=total, sys_len=sys_len, ref_len=ref_len)


def chrf_stats_one(hyp, ref, char_order=6, word_order=0):
    puncts = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")

    def words(s):
        out = []
        for w in s.split():
            if len(w) == 1:
                out.append(w)
            elif w[-1] in puncts:
                out += [w[:-1], w[-1]]
            elif w[0] in puncts:
                out += [w[0], w[1:]]
            else:
                out.append(w)
        return out

    def grams(s):
        t = "".join(s.split())
        gs = [Counter(t[i:i + n] for i in range(len(t) - n + 1)) for n in range(1, char_order + 1)]
        ws = words(s)
        gs += [Counter(" ".join(ws[i:i + n]) for i in range(len(ws) - n + 1)) for n in range(1, word_order + 1)]
        return gs

    st = []
    for h, r in zip(grams(hyp), grams(ref)):
        match = sum(min(c, r[g]) for g, c in h.items() if g in r)
        st += [sum(h.values()) if r else 0, sum(r.values()), match]
    return st


def chrf_from_stats(st, order, beta=2):
    factor = beta ** 2
    ap = ar = 0.0
    eff = 0
    for i in range(order):
        nh, nr, nm = st[3 * i:3 * i + 3]
        if nh > 0 and nr > 0:
            ap += nm / nh
            ar += nm / nr
            eff += 1
    if eff == 0:
        return 0.0
    ap, ar = ap / eff, ar / eff
    if ap + ar == 0:
        return 0.0
    # sacreBLEU's order of operations: this value also picks the best reference, and
    # mathematically equal scores must round alike to tie (the first reference wins).
    score = (1 + factor) * ap * ar
    score /= factor * ap + ar
    return 100 * score


def chrf_stats(hyp, refs, char_order=6, word_order=0, beta=2):
    best, best_f = None, -1.0
    for r in refs:
        if r is None:
            continue
        st = chrf_stats_one(hyp, r, char_order, word_order)
        f = chrf_from_stats(st, char_order + word_order, beta)
        if f > best_f:
            best, best_f = st, f
    return best


class StandIn:
    name = "stand-in (scripts/make_bleu_fixture.py; sacrebleu not available)"

    def corpus_bleu(self, hyps, streams):
        tot = None
        for i, h in enumerate(hyps):
            st = bleu_stats(h, [s[i] for s in streams])
            tot = st if tot is None else [a + b for a, b in zip(tot, st)]
        return bleu_from_stats(tot)

    def nrefs(self, hyps, streams):
        counts = {sum(s[i] is not None for s in streams) for i in range(len(hyps))}
        return counts.pop() if len(counts) == 1 else -1

    def sentence_bleu(self, hyp, refs):
        return bleu_from_stats(bleu_stats(hyp, refs), effective_order=True)["score"]

    def corpus_chrf(self, hyps, streams, word_order=0, beta=2):
        order = 6 + word_order
        tot = [0] * (3 * order)
        for i, h in enumerate(hyps):
            tot = [a + b for a, b in zip(tot, chrf_stats(h, [s[i] for s in streams], 6, word_order, beta))]
        return chrf_from_stats(tot, order, beta)

    def sentence_chrf(self, hyp, refs):
        return chrf_from_stats(chrf_stats(hyp, refs), 6)

    def tokenize(self, s):
        return tok13a(s)


class Real:
    def __init__(self, sacrebleu):
        self.sb = sacrebleu
        self.name = f"sacrebleu {sacrebleu.__version__}"
        from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
        self.tok = Tokenizer13a()

    def corpus_bleu(self, hyps, streams):
        b = self.sb.metrics.BLEU().corpus_score(hyps, streams)
        return dict(score=b.score, precisions=list(b.precisions), bp=b.bp, counts=list(b.counts),
                    totals=list(b.totals), sys_len=b.sys_len, ref_len=b.ref_len)

    def nrefs(self, hyps, streams):
        bleu = self.sb.metrics.BLEU()
        bleu.corpus_score(hyps, streams)
        return bleu.num_refs

    def sentence_bleu(self, hyp, refs):
        return self.sb.sentence_bleu(hyp, refs).score

    def corpus_chrf(self, hyps, streams, word_order=0, beta=2):
        return self.sb.metrics.CHRF(word_order=word_order, beta=beta).corpus_score(hyps, streams).score

    def sentence_chrf(self, hyp, refs):
        return self.sb.sentence_chrf(hyp, refs).score

    def tokenize(self, s):
        return self.tok(s.rstrip())


# --- the cases (written for this fixture; no corpus text) ------------------------------------

CASES = [
    ("single_ref_en", [
        "The cat sat on the mat.",
        "There is a dog in the garden, isn't there?",
        "I paid $1,000.50 for 2-3 tickets.",
        "He said &quot;hello&quot; &amp; left.",
        "Can you spare a minute?",
        "The meeting starts at 10:30 a.m. sharp!",
        "We never saw it coming...",
        "E-mail me at info@example.com (not tomorrow).",
        "It was 20% cheaper than last year's price.",
        "Nothing here matches at all",
    ], [[
        "The cat is sitting on the mat.",
        "There is a dog in the garden, is there not?",
        "I paid $1,000.50 for two or three tickets.",
        "He said \"hello\" and left.",
        "Could you spare a minute?",
        "The meeting begins at 10:30 a.m. sharp!",
        "We never saw it coming ...",
        "Email me at info@example.com (but not tomorrow).",
        "It was 20 % cheaper than last year's price.",
        "Completely different reference sentence .",
    ]]),
    ("german_unicode", [
        "Haben Sie eine Minute Zeit?",
        "Die Straße ist nass, weil es geregnet hat.",
        "Er wohnt in München – nicht in Köln.",
        "„Das ist großartig“, sagte sie.",
        "Ich habe 3,5 Kilo Äpfel gekauft.",
        "Über\u00a0den Wolken muss die Freiheit wohl grenzenlos sein.",
        "Das Wetter ist heute schön.",
    ], [[
        "Haben Sie mal eine Minute Zeit?",
        "Die Straße ist nass, da es geregnet hat.",
        "Er wohnt in München, nicht in Köln.",
        "„Das ist großartig“, meinte sie.",
        "Ich habe 3,5 Kilogramm Äpfel gekauft.",
        "Über den Wolken muss die Freiheit wohl grenzenlos sein.",
        "Heute ist das Wetter schön.",
    ]]),
    ("multi_ref", [
        "It is a guide to action which ensures that the military always obeys the commands of the party.",
        "He read the book because he was interested in world history.",
        "the the the the the the the",
    ], [[
        "It is a guide to action that ensures that the military will forever heed Party commands.",
        "He was interested in world history because he read the book.",
        "The cat is on the mat.",
    ], [
        "It is the guiding principle which guarantees the military forces always being under the command of the Party.",
        "He read the book because he was interested in world history.",
        "There is a cat on the mat.",
    ], [
        "It is the practical guide for the army always to heed the directions of the party.",
        "",
        "",
    ]]),
    ("short_brevity", [
        "The cat",
        "a b c",
        "",
    ], [[
        "The cat sat on the mat",
        "a b c d e f",
        "Some reference",
    ]]),
    # chrF picks the reference by a score whose rounding decides exact ties: here both
    # references of segment 0 score 20.833333333333336 in sacreBLEU and the first one wins;
    # computed as 100 * (1+b^2) P R / (b^2 P + R) the second one is higher (37.65, not 78.29).
    ("chrf_tie_first", ["aabb", "abc"], [["ac", "abc"], ["bacba", "abc"]]),
    # ... and here mathematically equal scores round apart in sacreBLEU (the second wins).
    ("chrf_tie_second", ["abab", "abc"], [["baab", "abc"], ["aa", "abc"]]),
    # the same for chrF++ (word n-grams): equal in sacreBLEU, the first wins.
    ("chrf_pp_tie", ["aa aa", "a b"], [["bb a a", "a b"], ["ba", "a b"]]),
    # Both references score 0: the first is kept, and its reference n-grams lower the corpus
    # recall (or, with "" first, do not).
    ("chrf_zero_tie", ["abc", "abcd"], [["xyz", "abcd"], ["", "abcd"]]),
    ("chrf_zero_tie_empty_first", ["abc", "abcd"], [["", "abcd"], ["xyz", "abcd"]]),
    # sacreBLEU >= 2.2 keeps "" as a zero-length reference: the closest length here (4 and 0
    # are both 2 away from 2, the shorter wins), so sentence BLEU is 100.
    ("empty_ref_closest", ["a b"], [["a b c d"], [""]]),
    ("multi_ref_one_empty", [
        "yes",
        "It is on the mat.",
        "no match here",
    ], [[
        "yes indeed it is",
        "The cat is on the mat.",
        "nothing",
    ], ["", "", ""], [
        "yes it is",
        "It is on a mat.",
        "something else",
    ]]),
    ("empty_hyp", ["", "the cat", ""], [["the cat sat", "the cat", ""]]),
    # Only empty references: every score is 0 (no error).
    ("all_empty_refs", ["a b", "c", ""], [["", "", ""]]),
    ("all_empty_refs_multi", ["a b", ""], [["", ""], ["", ""]]),
    # None: an absent reference, a varying number per segment (nrefs:var). The C++ writes
    # it as "" with empty_reference::absent.
    ("absent_refs", [
        "a b",
        "the cat sat on the mat",
        "x",
    ], [[
        "a b c d",
        "the cat is on the mat",
        "x y",
    ], [
        None,
        "a cat sat on the mat",
        None,
    ]]),
]

TOKENIZE = [
    "Hello, world!",
    "I paid $1,000.50 for 2-3 tickets.",
    "He said &quot;hi&quot; &amp; left &lt;now&gt;.",
    "Don't stop-believing, e.g. in 1990s.",
    "3.14, 2,5 and 1.000.000 - but x.y and x,y",
    "Mr. Smith's 5-year-old (son) ran: fast; faster? yes!",
    "a<skipped>b c-\nd e\nf",
    "  spaces\tand\u00a0nbsp\u2003em-space  ",
    "Über „Anführungszeichen“ – und Gedankenstriche…",
    "ends with digit-dash 1- and 2 -3",
    "[brackets] {braces} ^caret_ `tick` |pipe| ~tilde~ @at# %per& *star+ =eq",
    "...",
    ".,a,.",
    "Na.1 1.a a.b 1,2 a,1",
]


def build(impl):
    cases = []
    for name, hyps, streams in CASES:
        b = impl.corpus_bleu(hyps, streams)
        cases.append({
            "name": name,
            "hyps": hyps,
            "refs": streams,
            "bleu": b,
            "chrf": impl.corpus_chrf(hyps, streams),
            "chrf_pp": impl.corpus_chrf(hyps, streams, word_order=2),
            # beta 3: b^2 P is not exact, so a fused multiply-add would change the last bit
            "chrf_beta3": impl.corpus_chrf(hyps, streams, beta=3),
            "nrefs": impl.nrefs(hyps, streams),
            "sentence_bleu": [impl.sentence_bleu(h, [s[i] for s in streams]) for i, h in enumerate(hyps)],
            "sentence_chrf": [impl.sentence_chrf(h, [s[i] for s in streams]) for i, h in enumerate(hyps)],
        })
    return {
        "generator": impl.name,
        "defaults": "BLEU: tokenize=13a smooth=exp max_order=4 effective_order=no (sentence: yes); chrF: nc=6 nw=0 beta=2 (chrf_beta3: 3)",
        "tokenize_13a": [[s, impl.tokenize(s)] for s in TOKENIZE],
        "cases": cases,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/fixtures/bleu.json")
    ap.add_argument("--require-sacrebleu", action="store_true")
    a = ap.parse_args()
    stand_in = build(StandIn())
    try:
        import sacrebleu  # noqa: F401
        real = build(Real(sacrebleu))
    except ImportError:
        if a.require_sacrebleu:
            sys.exit("make_bleu_fixture: sacrebleu is not installed")
        real = None
    data = stand_in
    if real is not None:
        a_, b_ = json.dumps(stand_in, sort_keys=True), json.dumps(real, sort_keys=True)
        same = a_.replace(stand_in["generator"], "") == b_.replace(real["generator"], "")
        print(f"make_bleu_fixture: stand-in {'agrees with' if same else 'DIFFERS from'} {real['generator']}")
        data = real
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"make_bleu_fixture: wrote {a.out} ({data['generator']})")


if __name__ == "__main__":
    main()
