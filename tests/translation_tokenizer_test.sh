#!/usr/bin/env bash
# Test of scripts/train-translation-tokenizer's argument paths (ctest translation_tokenizer;
# no network, about a second): the default data folder (what scripts/fetch-data translation
# runs), --data DIR, and the errors, on a copy of tests/fixtures/translation_tiny. Each path
# must end with exit 0 and a spm.model, or with a non-zero exit and a message naming the fault.
#   bash tests/translation_tokenizer_test.sh [REPO_ROOT]
set -euo pipefail
ROOT="$(cd "${1:-$(dirname "$0")/..}" && pwd)"
TRAIN="$ROOT/scripts/train-translation-tokenizer"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
# shellcheck source=tests/shell/expect.sh
source "$ROOT/tests/shell/expect.sh"

fresh() {  # fresh DIR: a copy of the fixture corpus without its tokenizer
  mkdir -p "$1"
  cp "$ROOT"/tests/fixtures/translation_tiny/{train,dev,test}.{en,de} "$1"/
}
# runs COMMAND..., keeping its status and its stderr (the script runs under set -e here)
run() { status=0; err="$("$@" 2>&1 >/dev/null)" || status=$?; }

# the default folder, $DEPTHLAB_DATA_DIR/translation, with and without --with-mt's hint
for extra in "" "--with-mt"; do
  fresh "$TMP/default$extra/translation"
  run env DEPTHLAB_DATA_DIR="$TMP/default$extra" "$TRAIN" --vocab 50 $extra
  if [[ "$extra" == "" ]]; then
    { ((status == 0)) && [[ -s "$TMP/default/translation/spm.model" ]]; } || fail "default folder: exit $status, no spm.model: $err"
  else
    # --with-mt needs mt.{en,de}: a clear error naming what to run, not a silent exit
    { ((status != 0)) && [[ "$err" == *"fetch-translation --with-nlp-corpus"* ]]; } || fail "default folder --with-mt: exit $status: $err"
  fi
done
# --data DIR
fresh "$TMP/mine"
run "$TRAIN" --data "$TMP/mine" --vocab 50
{ ((status == 0)) && [[ -s "$TMP/mine/spm.model" ]]; } || fail "--data: exit $status, no spm.model: $err"
# errors: a missing folder, a vocabulary that is no number, one larger than the corpus allows
run "$TRAIN" --data "$TMP/nowhere" --vocab 50
{ ((status == 1)) && [[ "$err" == *"--data $TMP/nowhere: no such folder"* ]]; } || fail "--data missing: exit $status: $err"
run "$TRAIN" --data "$TMP/mine" --vocab many
{ ((status == 2)) && [[ "$err" == *"--vocab needs a number"* ]]; } || fail "--vocab many: exit $status: $err"
run "$TRAIN" --data "$TMP/mine" --vocab 100000
((status != 0)) || fail "--vocab 100000 on a tiny corpus: exit 0"

finish "translation_tokenizer (the default folder, --data and four errors)"
