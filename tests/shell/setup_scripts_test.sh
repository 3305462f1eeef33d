#!/usr/bin/env bash
# The argument paths of the setup and study scripts, offline, on fixtures: help, unknown
# flags and targets, flags without values or with bad values (exit 2 and a line naming
# them), train-tokenizer's runs on a tiny text, and sweep-albert on the tiny ALBERT corpus
# (its overrides take the last value of a flag given twice; a failing run fails the sweep).
# Nothing is downloaded: the fetch scripts are exercised up to their first download.
#   tests/shell/setup_scripts_test.sh ROOT BUILD_DIR
set -euo pipefail
ROOT="$1" BUILD="$2"
cd "$ROOT"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
# shellcheck source=tests/shell/expect.sh
source "$ROOT/tests/shell/expect.sh"

# ---- scripts/setup, fetch-data, fetch-translation: help and refusals (no network needed)
expect 0 "*Install the Debian*" scripts/setup --help
expect 2 "*unknown argument '--bogus'*" scripts/setup --bogus
expect 0 "*Targets:*" scripts/fetch-data --help
expect 2 "*unknown target 'nonsense' (known: english translation)*" scripts/fetch-data nonsense
expect 2 "*unknown option '--bogus'*" scripts/fetch-data --bogus
expect 0 "*--with-nlp-corpus*" scripts/fetch-translation --help
expect 2 "*unknown argument '--bogus'*" scripts/fetch-translation --bogus
expect 2 "*--direction is en-de or de-en*" scripts/fetch-translation --direction xx-yy

# ---- train-tokenizer: refusals, then a real run on a tiny text and its --no-encode path
expect 0 "*--vocab N*" scripts/train-tokenizer --help
expect 2 "*unknown argument '--bogus'*" scripts/train-tokenizer --bogus
expect 2 "*--vocab needs a value*" scripts/train-tokenizer --vocab
expect 2 "*--vocab needs a whole number >= 1, got 'many'*" scripts/train-tokenizer --vocab many
expect 2 "*--threads needs a whole number >= 1, got '0'*" scripts/train-tokenizer --threads 0
expect 2 "*--seed needs a whole number >= 0, got '-1'*" scripts/train-tokenizer --seed -1
expect 1 "*no training text at $TMP/none.txt*" scripts/train-tokenizer --input "$TMP/none.txt"
mkdir -p "$TMP/english"
head -n 150 tests/fixtures/english_sample.txt > "$TMP/english/train.txt"
tail -n +151 tests/fixtures/english_sample.txt > "$TMP/english/dev.txt"
expect 0 "*wrote $TMP/tok/spm.model*" scripts/train-tokenizer --input "$TMP/english/train.txt" --out "$TMP/tok/spm" --vocab 120 \
  --normalization identity --threads 1 --seed 3
for f in spm.model spm.vocab train.ids dev.ids; do [[ -s "$TMP/tok/$f" ]] || fail "train-tokenizer wrote no $TMP/tok/$f"; done
expect 0 "*wrote $TMP/lower/spm.model*" scripts/train-tokenizer --input "$TMP/english/train.txt" --out "$TMP/lower/spm" --vocab 120 \
  --lowercase --no-encode
[[ ! -e "$TMP/lower/train.ids" ]] || fail "train-tokenizer --no-encode wrote train.ids"

# ---- sweep-albert on the tiny ALBERT corpus: two good runs (one overriding the base
# --batch 32 with --batch 4), one that fails
exe="$BUILD/examples/albert_act"
if [[ -x "$exe" ]]; then
  small="--batch 4 --seq-len 32 --hidden 32 --heads 2 --ff 64 --embed 16 --max-iters 2 --dev-batches 1"
  expect 2 "*'nonsense' is not name=flags*" env BUILD_DIR="$BUILD" DATA=tests/fixtures/albert_tiny OUT="$TMP/sweep0" scripts/sweep-albert nonsense
  expect 1 "*1 of 3 runs failed: bad*" env BUILD_DIR="$BUILD" DATA=tests/fixtures/albert_tiny OUT="$TMP/sweep" STEPS=2 THREADS=1 \
    scripts/sweep-albert "a=$small" "b=$small --lr 1e-3" "bad=$small --lr -1"
  rows=$(($(wc -l < "$TMP/sweep/sweep.csv") - 1))
  ((rows == 2)) || fail "sweep-albert: $rows rows in sweep.csv, expected 2"
  grep -q "global batch 4" "$TMP/sweep/a.log" || fail "sweep-albert: --batch 4 after the base --batch 32 did not take effect"
else
  echo "setup_scripts_test: no $exe: sweep-albert not tested"
fi

finish setup_scripts_test
