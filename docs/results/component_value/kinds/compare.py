#!/usr/bin/env python3
"""Do the ablation kinds agree? Reads component_value runs of one model made with different
--ablation kinds and prints, for sub-layers and for heads, each module's BLEU drop under every
kind and the Spearman rank correlation of the drops between every pair of kinds.

    docs/results/component_value/kinds/compare.py zero=DIR mean=DIR resample=DIR

Sub-layer drops come from contribution.csv (baseline minus its metric_without[_KIND], the baseline being
summary.json's analysis BLEU), head drops from head_intervals.csv (its drop column)."""
import csv
import itertools
import json
import sys


def average_ranks(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0
        i = j + 1
    return ranks


def spearman(a, b):
    ra, rb = average_ranks(a), average_ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb) if va > 0 and vb > 0 else float("nan")


def rows(path):
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f))


def sublayer_drops(folder):
    with open(f"{folder}/summary.json", encoding="utf-8") as f:
        summary = json.load(f)
    base = summary["analysis_base_bleu"]
    # the column names the kind: metric_without (zero), metric_without_mean, metric_without_resample
    table = rows(f"{folder}/contribution.csv")
    column = next(c for c in table[0] if c.startswith("metric_without"))
    return {r["type"] + " " + str(int(r["layer"]) + 1): base - float(r[column]) for r in table}


def head_drops(folder):
    return {f"{r['module']} {int(r['layer']) + 1}.{r['head']}": float(r["drop"]) for r in rows(f"{folder}/head_intervals.csv")}


def report(title, runs):
    kinds = list(runs)
    modules = list(runs[kinds[0]])
    print(f"## {title}: BLEU drop when ablated\n")
    print("| module | " + " | ".join(kinds) + " |")
    print("|---|" + "---|" * len(kinds))
    for m in modules:
        print(f"| {m} | " + " | ".join(f"{runs[k][m]:.2f}" for k in kinds) + " |")
    print(f"\nSpearman between kinds ({len(modules)} {title.lower()}):\n")
    for a, b in itertools.combinations(kinds, 2):
        print(f"- {a} vs {b}: {spearman([runs[a][m] for m in modules], [runs[b][m] for m in modules]):.3f}")
    print()


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    folders = dict(arg.split("=", 1) for arg in argv[1:])
    report("Sub-layers", {k: sublayer_drops(d) for k, d in folders.items()})
    report("Heads", {k: head_drops(d) for k, d in folders.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
