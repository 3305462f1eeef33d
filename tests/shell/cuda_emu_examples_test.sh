#!/usr/bin/env bash
# The examples on the emulated CUDA device (a -DDEPTHLAB_CUDA_EMULATION=ON build) against the
# CPU, in f32 unless said (--precision auto would pick bf16 on the emulated sm_90 device and
# on a CPU with AVX512_BF16, f32 on others):
#   train_tiny       the final loss of --device cuda equals --device cpu's to 1e-5 relative, and
#                    a checkpoint written on one device resumes on the other to the same loss;
#                    in bf16 (the same rounded operands, f32 sums in another order) to 1e-3;
#   albert_act       the halting and fixed-point tables: counts equal, values to 1e-6 relative;
#   component_value  training: the step-10 loss to 1e-3 relative (printed with 4 decimals);
#                    the analyses of one checkpoint (contribution, criticality, both pruning
#                    curves): equal to 1e-9 — BLEU of greedy decoding is exact unless a
#                    near-tie flips a token, which this model on 6 sentences avoids.
#   lm_layers        training: the step-20 loss to 1e-3 relative; the analyses of the model the
#                    CPU trained (read back through its Hugging Face export): every table to
#                    1e-3 relative (perplexities from f32 sums in each device's order agree to
#                    ~1e-7; a rise, a difference of two of them, and its score to ~1e-4).
#   tests/shell/cuda_emu_examples_test.sh <source dir> <build-emu dir>
set -uo pipefail
src="$1" bin="$2"
# shellcheck source=tests/shell/expect.sh
source "$src/tests/shell/expect.sh"
work="$bin/cuda_emu_examples"
rm -rf "$work" && mkdir -p "$work"

# close A B RTOL: |A - B| <= RTOL |A|
close() { python3 -c 'import sys; a, b, r = map(float, sys.argv[1:]); sys.exit(0 if abs(a - b) <= r * abs(a) else 1)' "$@"; }
# same_table A.csv B.csv RTOL: the same header and rows, text fields equal, numbers to RTOL
# relative (1e-12 absolute)
same_table() {
  python3 - "$@" <<'EOF'
import csv, math, sys
a, b, rtol = sys.argv[1], sys.argv[2], float(sys.argv[3])
ra, rb = list(csv.reader(open(a))), list(csv.reader(open(b)))
if len(ra) != len(rb):
    sys.exit(f"{b}: {len(rb)} rows, {a}: {len(ra)}")
for n, (x, y) in enumerate(zip(ra, rb), 1):
    for u, v in zip(x, y):
        try:
            fu, fv = float(u), float(v)
        except ValueError:
            if u != v or len(x) != len(y):
                sys.exit(f"{b}:{n}: {y} vs {x}")
            continue
        if not (math.isnan(fu) and math.isnan(fv)) and abs(fu - fv) > 1e-12 + rtol * abs(fu):
            sys.exit(f"{b}:{n}: {v} vs {u} (beyond {rtol} relative)")
EOF
}
final_loss() { sed -n 's/^final eval loss //p' "$1"; }

# train_tiny: the same run on each device, and each device resuming the other's checkpoint
tiny=(--log-every 10 --save-every 10 --dim 32 --ff 64 --layers 1 --batch 8 --max-len 8 --precision f32)
for d in cpu cuda; do
  "$bin/examples/train_tiny" "${tiny[@]}" --steps 20 --device "$d" --out "$work/tiny_$d" >"$work/tiny_$d.log" 2>&1 ||
    fail "train_tiny --device $d: $(tail -3 "$work/tiny_$d.log")"
done
want="$(final_loss "$work/tiny_cpu.log")"
got="$(final_loss "$work/tiny_cuda.log")"
echo "train_tiny final eval loss: --device cpu $want, --device cuda (emulated) $got"
close "$want" "$got" 1e-5 || fail "train_tiny: --device cuda ends at $got, --device cpu at $want"
for pair in cpu:cuda cuda:cpu; do
  first="${pair%:*}" then="${pair#*:}" out="$work/resume_${first}_$then"
  if ! "$bin/examples/train_tiny" "${tiny[@]}" --steps 10 --device "$first" --out "$out" >"$out.log" 2>&1 ||
     ! "$bin/examples/train_tiny" "${tiny[@]}" --steps 20 --device "$then" --out "$out" --resume >"$out.log" 2>&1; then
    fail "train_tiny: 10 steps on $first resumed on $then: $(tail -3 "$out.log")"
  fi
  grep -q "resumed from" "$out.log" || fail "train_tiny on $then did not resume the checkpoint written on $first"
  got="$(final_loss "$out.log")"
  echo "train_tiny 10 steps on $first, resumed on $then to 20: final eval loss $got"
  close "$want" "$got" 1e-5 || fail "train_tiny resumed from $first on $then ends at $got, not $want"
done

# train_tiny in bf16: both devices round the GEMM operands alike and sum in f32 in their own order
for d in cpu cuda; do
  "$bin/examples/train_tiny" "${tiny[@]}" --precision bf16 --steps 20 --device "$d" --out "$work/tiny_bf16_$d" >"$work/tiny_bf16_$d.log" 2>&1 ||
    fail "train_tiny --precision bf16 --device $d: $(tail -3 "$work/tiny_bf16_$d.log")"
done
grep -q "bf16 (cuBLAS, bf16 tensor cores)" "$work/tiny_bf16_cuda.log" || fail "train_tiny --device cuda --precision bf16 does not say it runs bf16"
want16="$(final_loss "$work/tiny_bf16_cpu.log")"
got16="$(final_loss "$work/tiny_bf16_cuda.log")"
echo "train_tiny bf16 final eval loss: --device cpu $want16, --device cuda (emulated) $got16 (f32: $want)"
close "$want16" "$got16" 1e-3 || fail "train_tiny bf16: --device cuda ends at $got16, --device cpu at $want16"
close "$want" "$want16" 1e-7 && fail "train_tiny: bf16 and f32 end at the same loss $want16: bf16 not applied"

# albert_act: the ACT halting tables of a tiny run
act=(--data "$src/tests/fixtures/albert_tiny" --steps 8 --batch 8 --seq-len 32 --hidden 32 --heads 2 --ff 64 --embed 16
     --log-every 4 --eval-every 4 --dev-batches 2 --save-every 8 --precision f32)
for d in cpu cuda; do
  "$bin/examples/albert_act" "${act[@]}" --device "$d" --out "$work/act_$d" >"$work/act_$d.log" 2>&1 ||
    fail "albert_act --device $d: $(tail -3 "$work/act_$d.log")"
done
for f in halting.csv fixed_point.csv; do
  same_table "$work/act_cpu/$f" "$work/act_cuda/$f" 1e-6 || fail "albert_act: $f differs between cpu and cuda"
done
echo "albert_act: halting.csv and fixed_point.csv agree (counts equal, values to 1e-6)"

# component_value: a short training on each device; then the analyses, on cuda, of a model
# the CPU trained long enough to translate (BLEU ~30: the tables are not all zero)
cv=(--data "$src/tests/fixtures/translation_tiny" --preset tiny --lr 3e-3 --log-every 10 --dev-every 0 --dev-sentences 4
    --eval-sentences 6 --beam 1 --grid-steps 2 --prune-max-k 2 --rewind-k 0 --rewind-steps 0 --max-tokens 512 --precision f32)
for d in cpu cuda; do
  "$bin/examples/component_value" "${cv[@]}" --dim 64 --ff 128 --warmup 5 --steps 10 --save-every 10 --eval-sentences 1 \
    --prune-max-k 0 --grid-steps 1 --device "$d" --out "$work/cv_$d" >"$work/cv_$d.log" 2>&1 ||
    fail "component_value --device $d: $(tail -3 "$work/cv_$d.log")"
done
loss() { sed -n 's|^step 10/10  loss \([0-9.]*\).*|\1|p' "$1"; }
want="$(loss "$work/cv_cpu.log")" got="$(loss "$work/cv_cuda.log")"
echo "component_value step-10 loss: --device cpu $want, --device cuda (emulated) $got"
close "$want" "$got" 1e-3 || fail "component_value: the step-10 loss is $got on cuda, $want on cpu"
"$bin/examples/component_value" "${cv[@]}" --warmup 50 --steps 200 --save-every 200 --device cpu --out "$work/cv_trained" \
  >"$work/cv_trained.log" 2>&1 || fail "component_value (training on the cpu): $(tail -3 "$work/cv_trained.log")"
"$bin/examples/component_value" "${cv[@]}" --device cuda --checkpoint "$work/cv_trained/checkpoint.safetensors" \
  --out "$work/cv_analyses" >"$work/cv_analyses.log" 2>&1 || fail "component_value --checkpoint on cuda: $(tail -3 "$work/cv_analyses.log")"
grep -h "analysis metric" "$work/cv_trained.log" "$work/cv_analyses.log"
for f in contribution.csv criticality.csv pruning.csv pruning_criticality.csv; do
  same_table "$work/cv_trained/$f" "$work/cv_analyses/$f" 1e-9 || fail "component_value: $f differs between cpu and cuda"
done
echo "component_value: contribution, criticality and pruning tables agree between cpu and cuda"

# lm_layers: a short training on each device, then each device's analyses of the CPU's model
lm=(--data "$src/tests/fixtures/albert_tiny" --layers 2 --dim 16 --heads 2 --ff 32 --seq-len 32 --batch 4 --eval-sequences 8
    --dev-sequences 8 --grid-steps 2 --log-every 20 --eval-every 0 --lr 3e-3 --precision f32)
for d in cpu cuda; do
  "$bin/examples/lm_layers" "${lm[@]}" --steps 20 --device "$d" --out "$work/lm_$d" >"$work/lm_$d.log" 2>&1 ||
    fail "lm_layers --device $d: $(tail -3 "$work/lm_$d.log")"
done
want="$(sed -n 's|^step 20/20  loss \([0-9.]*\).*|\1|p' "$work/lm_cpu.log")" got="$(sed -n 's|^step 20/20  loss \([0-9.]*\).*|\1|p' "$work/lm_cuda.log")"
echo "lm_layers step-20 loss: --device cpu $want, --device cuda (emulated) $got"
close "$want" "$got" 1e-3 || fail "lm_layers: the step-20 loss is $got on cuda, $want on cpu"
"$bin/examples/lm_layers" "${lm[@]}" --hf-checkpoint "$work/lm_cpu/model" --device cuda --out "$work/lm_analyses" >"$work/lm_analyses.log" 2>&1 ||
  fail "lm_layers --hf-checkpoint on cuda: $(tail -3 "$work/lm_analyses.log")"
for f in block_influence.csv contribution.csv criticality.csv pruning.csv; do
  same_table "$work/lm_cpu/$f" "$work/lm_analyses/$f" 1e-3 || fail "lm_layers: $f differs between cpu and cuda"
done
echo "lm_layers: block influence, contribution, criticality and pruning tables agree between cpu and cuda (1e-3)"
finish cuda_emu_examples
