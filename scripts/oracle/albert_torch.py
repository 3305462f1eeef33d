# An independent PyTorch ALBERT (one tied post-LN layer applied N times, factorised
# embeddings, MLM + SOP heads) trained on the same corpus files as examples/albert_act,
# with a simple data pipeline written from the ALBERT paper (not from depthlab): it answers
# "does this model size, corpus and budget leave the unigram plateau at all?" beside
# depthlab's run of the same settings (docs/results/albert_act_recipe/).
#   /usr/bin/python3 scripts/oracle/albert_torch.py --steps 1000 --depth 2 --seq-len 64
import argparse, json, math, random, time
import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument('--data', default='.data/english')
p.add_argument('--steps', type=int, default=1000)
p.add_argument('--batch', type=int, default=32)
p.add_argument('--seq-len', type=int, default=128)
p.add_argument('--depth', type=int, default=6)
p.add_argument('--hidden', type=int, default=256)
p.add_argument('--heads', type=int, default=4)
p.add_argument('--ff', type=int, default=1024)
p.add_argument('--embed', type=int, default=128)
p.add_argument('--lr', type=float, default=1e-3)
p.add_argument('--warmup', type=int, default=-1)
p.add_argument('--mask-prob', type=float, default=0.15)
p.add_argument('--max-pred', type=int, default=20)
p.add_argument('--threads', type=int, default=2)
p.add_argument('--seed', type=int, default=1)
p.add_argument('--log-every', type=int, default=50)
p.add_argument('--eval-every', type=int, default=250)
p.add_argument('--out', default='')
p.add_argument('--pre-ln', action='store_true', help='norm_first layer (the original ALBERT is post-LN)')
p.add_argument('--unigram-bias', action='store_true', help='MLM output bias = log unigram frequency at start')
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(a.seed)
rng = random.Random(a.seed)
PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
V = sum(1 for _ in open(f'{a.data}/spm.vocab', encoding='utf-8'))

def read_docs(path):
    docs, cur = [], []
    for line in open(path):
        line = line.split()
        if not line:
            if cur: docs.append(cur)
            cur = []
        else:
            cur.append([int(t) for t in line])
    if cur: docs.append(cur)
    return docs

def example(docs, r):
    """[CLS] A [SEP] B [SEP] from consecutive sentences of one document; B before A with p 0.5."""
    target = a.seq_len - 3
    while True:
        d = docs[r.randrange(len(docs))]
        s = r.randrange(len(d))
        chunk, n = [], 0
        while s < len(d) and n < target:
            chunk.append(d[s]); n += len(d[s]); s += 1
        if len(chunk) >= 2: break
    cut = r.randint(1, len(chunk) - 1)
    A = [t for s in chunk[:cut] for t in s]
    B = [t for s in chunk[cut:] for t in s]
    while len(A) + len(B) > target:  # truncate the longer side
        (A if len(A) > len(B) else B).pop()
    swapped = r.random() < 0.5
    if swapped: A, B = B, A
    ids = [CLS] + A + [SEP] + B + [SEP]
    seg = [0] * (len(A) + 2) + [1] * (len(B) + 1)
    cand = [i for i, t in enumerate(ids) if t not in (CLS, SEP)]
    r.shuffle(cand)
    k = min(a.max_pred, max(1, round(len(ids) * a.mask_prob)))
    pos = sorted(cand[:k])
    labels = [ids[i] for i in pos]
    for i in pos:
        u = r.random()
        if u < 0.8: ids[i] = MASK
        elif u < 0.9: ids[i] = r.randrange(5, V)
    return ids, seg, pos, labels, int(swapped)

def batch(docs, r, n):
    exs = [example(docs, r) for _ in range(n)]
    T = max(len(e[0]) for e in exs)
    ids = torch.zeros(n, T, dtype=torch.long); seg = torch.zeros(n, T, dtype=torch.long)
    keep = torch.zeros(n, T, dtype=torch.bool)
    flat, labels = [], []
    for b, (i, s, pos, lab, _) in enumerate(exs):
        ids[b, :len(i)] = torch.tensor(i); seg[b, :len(s)] = torch.tensor(s); keep[b, :len(i)] = True
        flat += [b * T + q for q in pos]; labels += lab
    return ids, seg, keep, torch.tensor(flat), torch.tensor(labels), torch.tensor([e[4] for e in exs])

class Albert(nn.Module):
    def __init__(s):
        super().__init__()
        H, E = a.hidden, a.embed
        s.word = nn.Embedding(V, E); s.pos = nn.Embedding(a.seq_len, E); s.seg = nn.Embedding(2, E)
        s.eln = nn.LayerNorm(E, eps=1e-12); s.proj = nn.Linear(E, H)
        s.layer = nn.TransformerEncoderLayer(H, a.heads, a.ff, dropout=0.0, activation='gelu', batch_first=True, layer_norm_eps=1e-12, norm_first=a.pre_ln)
        s.fln = nn.LayerNorm(H, eps=1e-12) if a.pre_ln else nn.Identity()
        s.mdense = nn.Linear(H, E); s.mln = nn.LayerNorm(E, eps=1e-12); s.mbias = nn.Parameter(torch.zeros(V))
        s.pooler = nn.Linear(H, H); s.sop = nn.Linear(H, 2)
        for m in s.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)): nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None: nn.init.zeros_(m.bias)
        nn.init.normal_(s.layer.self_attn.in_proj_weight, std=0.02)
    def forward(s, ids, seg, keep, flat):
        B, T = ids.shape
        x = s.eln(s.word(ids) + s.pos(torch.arange(T))[None] + s.seg(seg))
        h = s.proj(x)
        for _ in range(a.depth):
            h = s.layer(h, src_key_padding_mask=~keep)
        h = s.fln(h)
        m = s.mln(F.gelu(s.mdense(h.reshape(B * T, -1)[flat])))
        mlm = m @ s.word.weight.t() + s.mbias
        sop = s.sop(torch.tanh(s.pooler(h[:, 0])))
        return mlm, sop

train, dev = read_docs(f'{a.data}/train.ids'), read_docs(f'{a.data}/dev.ids')
model = Albert()
if a.unigram_bias:
    counts = torch.ones(V)
    for d in train:
        for sent in d: counts += torch.bincount(torch.tensor(sent), minlength=V).float()
    with torch.no_grad(): model.mbias.copy_((counts / counts.sum()).log())
opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.01)
warm = a.warmup if a.warmup >= 0 else a.steps // 10
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: min((k + 1) / max(warm, 1), max(0.0, (a.steps - k) / max(a.steps - warm, 1))))
dev_r = random.Random(4242); dev_batches = [batch(dev, dev_r, a.batch) for _ in range(8)]
log = open(a.out, 'w') if a.out else None

def evaluate(step):
    model.eval(); ok = n = sok = sn = 0; loss = 0.0
    with torch.no_grad():
        for ids, seg, keep, flat, lab, sop in dev_batches:
            mlm, s = model(ids, seg, keep, flat)
            loss += F.cross_entropy(mlm, lab, reduction='sum').item()
            ok += (mlm.argmax(-1) == lab).sum().item(); n += len(lab)
            sok += (s.argmax(-1) == sop).sum().item(); sn += len(sop)
    model.train()
    rec = {'step': step, 'dev_mlm_acc': 100 * ok / n, 'dev_sop_acc': 100 * sok / sn, 'dev_mlm_loss': loss / n}
    print(f"  dev @ {step}: MLM acc {rec['dev_mlm_acc']:.1f}%  SOP acc {rec['dev_sop_acc']:.1f}%  MLM loss {rec['dev_mlm_loss']:.3f}", flush=True)
    if log: log.write(json.dumps(rec) + '\n'); log.flush()

print(f'albert_torch: H {a.hidden}, depth {a.depth} (tied), vocab {V}, batch {a.batch} x {a.seq_len}, AdamW lr {a.lr}, warm-up {warm}, '
      f'{sum(q.numel() for q in model.parameters())} parameters, {a.threads} threads', flush=True)
t0 = time.time()
for step in range(1, a.steps + 1):
    ids, seg, keep, flat, lab, sop = batch(train, rng, a.batch)
    mlm, s = model(ids, seg, keep, flat)
    lm, ls = F.cross_entropy(mlm, lab), F.cross_entropy(s, sop)
    opt.zero_grad(); (lm + ls).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step(); sched.step()
    if step % a.log_every == 0:
        el = time.time() - t0
        print(f'step {step}/{a.steps}  mlm {lm.item():.3f}  sop {ls.item():.3f}  lr {sched.get_last_lr()[0]:.2e}  '
              f'{step / el:.2f} steps/s  ETA {(a.steps - step) * el / step / 60:.1f} min', flush=True)
    if step % a.eval_every == 0 or step == a.steps: evaluate(step)
