#!/usr/bin/env bash
# The study programs on bad input, as a new user would meet it (docs/reliability.md): broken
# and empty corpora, a tokenizer that is not the checkpoint's, runs that diverge without a
# NaN, flag edges, memory asked for beyond the machine. Each case: the exit code and the
# message that names the file, flag or step; for a divergence, the checkpoint left on disk.
#   tests/shell/bad_input_test.sh ROOT BUILD_DIR     (~20 s on 2 cores)
set -euo pipefail
ROOT="$1" BUILD="$2"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
# shellcheck source=tests/shell/expect.sh
source "$ROOT/tests/shell/expect.sh"
ex="$BUILD/examples"
for p in component_value albert_act train_tiny albert_probe; do
  [[ -x "$ex/$p" ]] || { echo "bad_input_test: no $ex/$p (build the examples)" >&2; exit 1; }
done
export OMP_NUM_THREADS=2

# ---- translation corpora (component_value), each a copy of the fixture with one fault
trans="$ROOT/tests/fixtures/translation_tiny"
copy() { rm -rf "${TMP:?}/$1"; cp -r "$trans" "$TMP/$1"; }
cv=("$ex/component_value" --preset tiny --log-every 1 --dev-every 0 --dev-sentences 5 --eval-sentences 5 --grid-steps 2
    --prune-max-k 1 --rewind-k 0 --rewind-steps 1 --max-tokens 256)
copy binary; printf 'Hello\n\0\x01\x02 binary\n' > "$TMP/binary/train.en"
expect 1 "*$TMP/binary/train.en:2: byte 1 (0x00) is a NUL byte: not UTF-8 text*" "${cv[@]}" --data "$TMP/binary" --steps 2 --out "$TMP/o1"
copy latin1; printf 'caf\xe9\n' > "$TMP/latin1/test.de"
expect 1 "*$TMP/latin1/test.de:1: byte 4 (0xe9) is not valid UTF-8*" "${cv[@]}" --data "$TMP/latin1" --steps 2 --out "$TMP/o2"
copy emptytest; : > "$TMP/emptytest/test.en"; : > "$TMP/emptytest/test.de"
expect 1 "*$TMP/emptytest/test.en and $TMP/emptytest/test.de are empty*" "${cv[@]}" --data "$TMP/emptytest" --steps 2 --out "$TMP/o3"
copy blank; printf '\n%.0s' {1..300} > "$TMP/blank/train.en"; cp "$TMP/blank/train.en" "$TMP/blank/train.de"
expect 1 "*train.de hold no pair with text on both sides (300 blank)*" "${cv[@]}" --data "$TMP/blank" --steps 2 --out "$TMP/o4"
# a small corpus runs, and says how small it is
expect 0 "*warning: $trans/train.en and $trans/train.de: only 300 sentence pairs (fewer than 1000*" \
  "${cv[@]}" --data "$trans" --steps 3 --out "$TMP/good"
# a tokenizer that is not the checkpoint's: refused by --checkpoint and by --resume
copy othertok
spm_train --input="$trans/train.en" --model_prefix="$TMP/othertok/spm" --vocab_size=40 --model_type=unigram \
  --pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3 --minloglevel=2 > /dev/null 2>&1
expect 1 "*the tokenizer $TMP/othertok/spm.model (40 pieces, fingerprint *) is not the one $TMP/good/checkpoint.safetensors was trained with (300 pieces*" \
  "${cv[@]}" --data "$TMP/othertok" --checkpoint "$TMP/good/checkpoint.safetensors" --out "$TMP/o5"
expect 1 "*is not the one $TMP/good/checkpoint.safetensors was trained with*" "${cv[@]}" --data "$TMP/othertok" --steps 6 --resume --out "$TMP/good"
# a learning rate that blows the loss up without a NaN
expect 1 "*trainer: step 2: diverged: the loss * is above *, the bound that divergence.loss_factor 10 sets*" \
  "${cv[@]}" --data "$trans" --steps 30 --lr 1e6 --out "$TMP/o6"

# ---- albert_act: a good checkpoint resumed with a learning rate of 1e30 stays on disk as it was
albert="$ROOT/tests/fixtures/albert_tiny"
aa=("$ex/albert_act" --data "$albert" --batch 4 --seq-len 32 --hidden 32 --heads 2 --ff 64 --embed 16 --max-iters 3 --eval-every 0
    --dev-batches 1 --log-every 1)
expect 0 "*report: $TMP/act/report.html*" "${aa[@]}" --steps 4 --save-every 2 --out "$TMP/act"
sum_before="$(sha256sum < "$TMP/act/checkpoint.safetensors")"
expect 1 "*trainer: step 5: diverged: *the last checkpoint (step 4, $TMP/act/checkpoint.safetensors) is kept*" \
  "${aa[@]}" --steps 8 --save-every 1 --lr 1e30 --resume --out "$TMP/act"
[[ "$(sha256sum < "$TMP/act/checkpoint.safetensors")" == "$sum_before" ]] || fail "albert_act --lr 1e30 --resume changed the good checkpoint"
expect 1 "*--min-iters 100 exceeds N_max 3*" "${aa[@]}" --steps 2 --min-iters 100 --out "$TMP/act2"
rm -rf "$TMP/atok"; cp -r "$albert" "$TMP/atok"; sed -i '10s/^[^\t]*/zzzz/' "$TMP/atok/spm.vocab"
expect 1 "*the tokenizer $TMP/atok/spm.vocab (* pieces, fingerprint *) is not the one*" \
  "${aa[@]}" --data "$TMP/atok" --steps 6 --resume --out "$TMP/act"

# ---- albert_probe: task lists
probe="$ROOT/tests/fixtures/probe_tiny"
expect 0 "*" "$ex/albert_act" --data "$probe" --steps 2 --batch 4 --seq-len 32 --hidden 32 --heads 2 --ff 64 --embed 16 --max-iters 2 \
  --eval-every 0 --dev-batches 1 --out "$TMP/pact"
pr=("$ex/albert_probe" --checkpoint "$TMP/pact/checkpoint.safetensors" --data "$probe" --out "$TMP/probe")
expect 1 "*'all' must be the only task name*" "${pr[@]}" --tasks all,Nonsense
expect 1 "*task 'SentLen' is listed twice*" "${pr[@]}" --tasks SentLen,SentLen
expect 1 "*the tokenizer $probe/spm.model * is not the one*" "$ex/albert_probe" --checkpoint "$TMP/act/checkpoint.safetensors" --data "$probe" --out "$TMP/probe"

# ---- train_tiny: flag edges
tt=("$ex/train_tiny" --batch 8 --max-len 8 --dim 32 --heads 2 --ff 64 --layers 1 --log-every 1)
expect 0 "*step 2/2*" "${tt[@]}" --steps 1 --steps 2 --out "$TMP/tt"   # the last value of a flag wins
expect 1 "*is at step 2, beyond steps 1: nothing to train*" "${tt[@]}" --steps 1 --resume --out "$TMP/tt"
expect 0 "*nothing to train (steps is 0)*" "${tt[@]}" --steps 0 --out "$TMP/tt0"
[[ -f "$TMP/tt0/checkpoint.safetensors" ]] || fail "train_tiny --steps 0 named a checkpoint it did not write"
expect 2 "*--seed: Value -1 is negative*" "${tt[@]}" --seed -1
expect 2 "*--steps: Value abc is not a whole number*" "${tt[@]}" --steps abc
expect 2 "*--lr: Value 0 is out of range: it must be > 0 (see --help)" "${tt[@]}" --lr 0
expect 1 "*out of memory*the sizes come from --batch 1048576 --max-len 4096 --dim 32*" \
  bash -c 'ulimit -v 4000000; exec "$@"' _ "$ex/train_tiny" --batch 1048576 --max-len 4096 --dim 32 --heads 2 --ff 64 --layers 1 --steps 1 --out "$TMP/oom"

finish bad_input_test
