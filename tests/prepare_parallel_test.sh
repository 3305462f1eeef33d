#!/usr/bin/env bash
# Test of scripts/prepare-parallel (ctest prepare_parallel; no network, a few seconds).
#   bash tests/prepare_parallel_test.sh [REPO_ROOT]
# Builds a small TSV and two aligned files in a temporary folder and checks the split sizes,
# the filters and their counts, source-side de-duplication, seeded determinism, meta.json,
# the second corpus, and the errors (exit status and message).
set -euo pipefail
ROOT="$(cd "${1:-$(dirname "$0")/..}" && pwd)"
PREP="$ROOT/scripts/prepare-parallel"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
failures=0
checks=0

fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
check() { # check DESCRIPTION COMMAND...
  local what="$1"
  shift
  checks=$((checks + 1))
  "$@" || fail "$what"
}
lines() { wc -l <"$1" | tr -d ' '; }
eq() { [[ "$1" == "$2" ]] || { echo "  expected '$2', got '$1'" >&2; return 1; }; }
# meta KEY.PATH: a value of DIR/meta.json, e.g. meta "$d" splits.train.pairs
meta() {
  python3 - "$1/meta.json" "$2" <<'PY'
import json, sys
v = json.load(open(sys.argv[1], encoding="utf-8"))
for k in sys.argv[2].split("."):
    v = v[k]
print(json.dumps(v) if not isinstance(v, str) else v)
PY
}
# expect_error WANT_RC MESSAGE_PART ARGS...: prepare-parallel fails with WANT_RC and one
# stderr line containing MESSAGE_PART.
expect_error() {
  local want_rc="$1" part="$2" rc=0
  shift 2
  checks=$((checks + 1))
  "$PREP" "$@" >"$TMP/out.txt" 2>"$TMP/err.txt" || rc=$?
  if [[ "$rc" != "$want_rc" ]]; then
    fail "prepare-parallel $* exited $rc, not $want_rc ($(cat "$TMP/err.txt"))"
  elif ! grep -qF -- "$part" "$TMP/err.txt"; then
    fail "prepare-parallel $*: stderr lacks '$part': $(cat "$TMP/err.txt")"
  elif [[ "$(lines "$TMP/err.txt")" != 1 ]]; then
    fail "prepare-parallel $*: stderr is not one line: $(cat "$TMP/err.txt")"
  fi
}

# --- inputs ----------------------------------------------------------------------------
# 60 distinct pairs, then noise: 5 duplicate sources (other targets), 1 line with one column,
# 2 with an empty side, 1 with a 12-word side, odd whitespace and a CRLF line.
python3 - "$TMP" <<'PY'
import os, sys
d = sys.argv[1]
rows = [f"le chat numéro {i} dort.\tthe cat number {i} sleeps." for i in range(60)]
rows += [f"le chat numéro {i} dort.\tcat {i} is sleeping." for i in range(5)]     # duplicate sources
rows += ["une seule colonne"]                                                       # too few columns
rows += ["\tempty source", "source vide\t   "]                                      # empty sides
rows += ["un deux trois quatre cinq six sept huit neuf dix onze douze\ttwelve words"]  # long
rows += ["  des   espaces \t  extra   spaces  \r"]                                  # whitespace, CRLF
with open(os.path.join(d, "pairs.tsv"), "w", encoding="utf-8", newline="") as f:
    f.write("".join(r + "\n" for r in rows))
# TSV with the columns the other way round and an id column: id \t en \t fr
with open(os.path.join(d, "swapped.tsv"), "w", encoding="utf-8", newline="\n") as f:
    for i in range(30):
        f.write(f"{i}\tthe dog {i} runs.\tle chien {i} court.\n")
with open(os.path.join(d, "a.fr"), "w", encoding="utf-8") as fs, open(os.path.join(d, "a.en"), "w", encoding="utf-8") as ft:
    for i in range(40):
        fs.write(f"bonjour {i}\n")
        ft.write(f"hello {i}\n")
with open(os.path.join(d, "short.en"), "w", encoding="utf-8") as f:
    for i in range(39):
        f.write(f"hello {i}\n")
PY

# --- a TSV, with every filter ----------------------------------------------------------
A="$TMP/a"
check "prepare-parallel on a TSV succeeds" \
  "$PREP" --src-lang fr --tgt-lang en --tsv "$TMP/pairs.tsv" --out "$A" --dev 10 --test 7 --max-words 10 --name "test corpus"
for s in train dev test; do
  for l in fr en; do check "$A/$s.$l exists" test -f "$A/$s.$l"; done
  check "$s.fr and $s.en are aligned" eq "$(lines "$A/$s.fr")" "$(lines "$A/$s.en")"
done
# 70 lines: 1 too few columns, 2 empty, 1 too long, 5 duplicate sources -> 61 pairs.
check "test split size" eq "$(lines "$A/test.fr")" 7
check "dev split size" eq "$(lines "$A/dev.fr")" 10
check "train split size" eq "$(lines "$A/train.fr")" 44
check "no source sentence twice" eq "$(cat "$A"/{train,dev,test}.fr | sort | uniq -d | wc -l | tr -d ' ')" 0
check "first occurrence of a duplicate kept" eq "$(cat "$A"/{train,dev,test}.en | grep -c '^cat [0-9] is sleeping\.$' || true)" 0
check "whitespace normalised" grep -qx 'des espaces' "$A/train.fr" "$A/dev.fr" "$A/test.fr"
check "CR removed" eq "$(cat "$A"/*.fr "$A"/*.en | grep -c $'\r' || true)" 0
check "pairs stay aligned" eq "$(paste "$A/train.fr" "$A/train.en" | grep -v '^des espaces' |
  sed -E 's/^le chat numéro ([0-9]+) dort\.\tthe cat number \1 sleeps\.$/ok/' | sort -u)" ok
check "meta source" eq "$(meta "$A" source)" "test corpus"
check "meta src" eq "$(meta "$A" src)" fr
check "meta tgt" eq "$(meta "$A" tgt)" en
check "meta direction" eq "$(meta "$A" direction)" fr-en
check "meta seed" eq "$(meta "$A" seed)" 20261129
check "meta splits" eq "$(meta "$A" splits)" '{"train": {"pairs": 44}, "dev": {"pairs": 10}, "test": {"pairs": 7}}'
check "meta filter" eq "$(meta "$A" filter)" \
  '{"lines": 70, "too_few_columns": 1, "empty": 2, "too_long": 1, "duplicate_source": 5, "kept": 61}'
check "meta inputs" eq "$(meta "$A" inputs)" "[\"$TMP/pairs.tsv\"]"
check "no temporary files left" eq "$(find "$A" -name '.*' -type f | wc -l | tr -d ' ')" 0

# --keep-duplicates keeps the 5 duplicate sources.
check "--keep-duplicates" "$PREP" --src-lang fr --tgt-lang en --tsv "$TMP/pairs.tsv" --out "$TMP/dup" --dev 10 --test 7 \
  --max-words 10 --keep-duplicates
check "--keep-duplicates train size" eq "$(lines "$TMP/dup/train.fr")" 49

# --- seeded determinism ----------------------------------------------------------------
"$PREP" --src-lang fr --tgt-lang en --tsv "$TMP/pairs.tsv" --out "$TMP/a2" --dev 10 --test 7 --max-words 10 --name "test corpus" >/dev/null
"$PREP" --src-lang fr --tgt-lang en --tsv "$TMP/pairs.tsv" --out "$TMP/b" --dev 10 --test 7 --max-words 10 --seed 7 >/dev/null
for f in {train,dev,test}.{fr,en} meta.json; do
  check "same seed -> identical $f" cmp -s "$A/$f" "$TMP/a2/$f"
done
check "other seed -> different test split" bash -c "! cmp -s '$A/test.fr' '$TMP/b/test.fr'"
check "other seed -> same pairs overall" eq "$(cat "$TMP/b"/{train,dev,test}.fr | sort | md5sum)" \
  "$(cat "$A"/{train,dev,test}.fr | sort | md5sum)"

# --- TSV columns, aligned files, the second corpus -------------------------------------
check "--tsv-columns 3,2" "$PREP" --src-lang fr --tgt-lang en --tsv "$TMP/swapped.tsv" --tsv-columns 3,2 --out "$TMP/cols" --dev 3 --test 3
check "--tsv-columns picks the source column" grep -qx 'le chien 0 court\.' "$TMP/cols/train.fr" "$TMP/cols/dev.fr" "$TMP/cols/test.fr"
check "--tsv-columns picks the target column" grep -qx 'the dog 0 runs\.' "$TMP/cols/train.en" "$TMP/cols/dev.en" "$TMP/cols/test.en"

F="$TMP/files"
check "aligned files with a second corpus" "$PREP" --src-lang fr --tgt-lang en_GB --src-file "$TMP/a.fr" --tgt-file "$TMP/a.en" \
  --out "$F" --dev 5 --test 5 --extra-src-file "$TMP/a.fr" --extra-tgt-file "$TMP/a.en"
check "files: train size" eq "$(lines "$F/train.fr")" 30
check "files: language code with a suffix as extension" test -f "$F/train.en_GB"
# The extra corpus is the same 40 pairs: the 10 in dev/test are removed.
check "second corpus size" eq "$(lines "$F/mt.fr")" 30
check "second corpus aligned" eq "$(lines "$F/mt.en_GB")" 30
check "second corpus has no dev/test sentence" eq "$(cat "$F"/{dev,test}.fr "$F/mt.fr" | sort | uniq -d | wc -l | tr -d ' ')" 0
check "second corpus in meta" eq "$(meta "$F" second_corpus.pairs)" 30
check "second corpus filter counts" eq "$(meta "$F" second_corpus.filter.in_dev_or_test)" 10
check "default name from the inputs" eq "$(meta "$F" source)" "a.fr + a.en"
check "--second-corpus-name" "$PREP" --src-lang fr --tgt-lang en --src-file "$TMP/a.fr" --tgt-file "$TMP/a.en" \
  --out "$TMP/named" --dev 5 --test 5 --extra-tsv "$TMP/swapped.tsv" --extra-tsv-columns 3,2 --second-corpus-name extra
check "--second-corpus-name file" eq "$(lines "$TMP/named/extra.fr")" 30
# Rerunning without the second corpus removes the stale one (it would overlap the new dev/test).
check "rerun without a second corpus" "$PREP" --src-lang fr --tgt-lang en_GB --src-file "$TMP/a.fr" --tgt-file "$TMP/a.en" \
  --out "$F" --dev 5 --test 5 --seed 3
check "stale second corpus removed" test ! -e "$F/mt.fr"

# --- the summary line ------------------------------------------------------------------
out="$("$PREP" --src-lang fr --tgt-lang en --tsv "$TMP/pairs.tsv" --out "$TMP/c" --dev 10 --test 7 --max-words 10)"
check "one summary line" eq "$(printf '%s\n' "$out" | wc -l | tr -d ' ')" 1
check "summary counts" grep -qF "train 44 dev 10 test 7" <<<"$out"

# --- errors ----------------------------------------------------------------------------
expect_error 1 "$TMP/a.fr has 40 lines but $TMP/short.en has 39" \
  --src-lang fr --tgt-lang en --src-file "$TMP/a.fr" --tgt-file "$TMP/short.en" --out "$TMP/e" --dev 1 --test 1
expect_error 2 "--src-lang: 'French'" --src-lang French --tgt-lang en --tsv "$TMP/pairs.tsv" --out "$TMP/e"
expect_error 2 "--tgt-lang: 'e'" --src-lang fr --tgt-lang e --tsv "$TMP/pairs.tsv" --out "$TMP/e"
expect_error 2 "--tgt-lang: 'en/x'" --src-lang fr --tgt-lang en/x --tsv "$TMP/pairs.tsv" --out "$TMP/e"
expect_error 2 "both 'fr'" --src-lang fr --tgt-lang fr --tsv "$TMP/pairs.tsv" --out "$TMP/e"
expect_error 1 "$TMP/missing.tsv: no such file" --src-lang fr --tgt-lang en --tsv "$TMP/missing.tsv" --out "$TMP/e"
expect_error 1 "$TMP/missing.en: no such file" --src-lang fr --tgt-lang en --src-file "$TMP/a.fr" --tgt-file "$TMP/missing.en" --out "$TMP/e"
expect_error 1 "only 61 pairs" --src-lang fr --tgt-lang en --tsv "$TMP/pairs.tsv" --out "$TMP/e" --dev 30 --test 31 --max-words 10
expect_error 2 "--dev: 'x' is not an integer" --src-lang fr --tgt-lang en --tsv "$TMP/pairs.tsv" --out "$TMP/e" --dev x
expect_error 2 "--max-words: '-1' is negative" --src-lang fr --tgt-lang en --tsv "$TMP/pairs.tsv" --out "$TMP/e" --max-words -1
expect_error 2 "--tsv-columns" --src-lang fr --tgt-lang en --tsv "$TMP/pairs.tsv" --tsv-columns 1 --out "$TMP/e"
expect_error 2 "unrecognized arguments: --bogus" --src-lang fr --tgt-lang en --tsv "$TMP/pairs.tsv" --out "$TMP/e" --bogus
expect_error 2 "--out" --src-lang fr --tgt-lang en --tsv "$TMP/pairs.tsv"
expect_error 2 "--tsv" --src-lang fr --tgt-lang en --tsv "$TMP/pairs.tsv" --src-file "$TMP/a.fr" --tgt-file "$TMP/a.en" --out "$TMP/e"
expect_error 2 "--extra-tgt-file" --src-lang fr --tgt-lang en --tsv "$TMP/pairs.tsv" --out "$TMP/e" --extra-src-file "$TMP/a.fr"
check "no output folder after the errors" test ! -e "$TMP/e"
check "--help exits 0 and has an example" bash -c "'$PREP' --help | grep -q 'Example:'"

if ((failures)); then
  echo "prepare_parallel_test: $failures of $checks checks failed" >&2
  exit 1
fi
echo "prepare_parallel_test: all $checks checks passed"
