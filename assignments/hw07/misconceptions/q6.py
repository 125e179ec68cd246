"""q6 variants: the spec's misconceptions M24-M30 and correct alternatives."""
from coursekit.harness import Variant

VARIANTS = [
    Variant("M24", "q6", note="no shift: targets are the inputs (copy task)", expect=("copy its input",), source='''
def shift_for_next_token(x):
    return x, x
'''),
    Variant("M24-trimmed", "q6", note="no shift, but both trimmed to T-1", expect=("copy its input",), source='''
def shift_for_next_token(x):
    return x[:, :-1], x[:, :-1]
'''),
    Variant("M25", "q6", note="shifted the wrong way", expect=("wrong way",), source='''
def shift_for_next_token(x):
    return x[:, 1:], x[:, :-1]
'''),
    Variant("M26", "q6", note="padding targets counted", expect=("counts the padding targets",), source='''
def lm_loss(logits, targets, pad_id=None):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
'''),
    Variant("M27-positions", "q6", note="real targets' sum divided by B*T", expect=("number of positions",), source='''
def lm_loss(logits, targets, pad_id=None):
    V = logits.size(-1)
    ignore = -100 if pad_id is None else pad_id
    total = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=ignore, reduction="sum")
    return total / targets.numel()
'''),
    Variant("M27-sequences", "q6", note="summed loss divided by the number of sequences",
            expect=("number of sequences",), source='''
def lm_loss(logits, targets, pad_id=None):
    V = logits.size(-1)
    ignore = -100 if pad_id is None else pad_id
    total = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=ignore, reduction="sum")
    return total / targets.shape[0]
'''),
    Variant("M27-mean-of-means", "q6", note="mean of per-sequence mean losses", expect=("mean of per-sequence",),
            source='''
def lm_loss(logits, targets, pad_id=None):
    ignore = -100 if pad_id is None else pad_id
    means = [F.cross_entropy(l, t, ignore_index=ignore) for l, t in zip(logits, targets) if (t != ignore).any()]
    return torch.stack(means).mean()
'''),
    Variant("M28", "q6", note="softmax applied before cross_entropy", expect=("softmax before cross-entropy",),
            source='''
def lm_loss(logits, targets, pad_id=None):
    V = logits.size(-1)
    ignore = -100 if pad_id is None else pad_id
    probs = logits.softmax(dim=-1)
    return F.cross_entropy(probs.reshape(-1, V), targets.reshape(-1), ignore_index=ignore)
'''),
    Variant("M29", "q6", note="batch and time scrambled by a transpose before reshape", expect=("transpose",),
            source='''
def lm_loss(logits, targets, pad_id=None):
    V = logits.size(-1)
    ignore = -100 if pad_id is None else pad_id
    return F.cross_entropy(logits.transpose(0, 1).reshape(-1, V), targets.reshape(-1), ignore_index=ignore)
'''),
    Variant("M30", "q6", note="each microbatch divided by its own real-target count (then by K)",
            expect=("own real targets",), source='''
def accumulate_lm_gradients(model, batch, micro_batch_size, pad_id):
    inputs, targets = batch[:, :-1], batch[:, 1:]
    ignore = -100 if pad_id is None else pad_id
    starts = range(0, batch.shape[0], micro_batch_size)
    total = 0.0
    for start in starts:
        logits = model(inputs[start:start + micro_batch_size])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)),
                               targets[start:start + micro_batch_size].reshape(-1), ignore_index=ignore)
        (loss / len(starts)).backward()
        total += loss.item() / len(starts)
    return total
'''),
    Variant("M30-no-k", "q6", note="each microbatch's mean loss, no division at all",
            expect=("own real targets",), source='''
def accumulate_lm_gradients(model, batch, micro_batch_size, pad_id):
    inputs, targets = batch[:, :-1], batch[:, 1:]
    ignore = -100 if pad_id is None else pad_id
    total, k = 0.0, 0
    for start in range(0, batch.shape[0], micro_batch_size):
        logits = model(inputs[start:start + micro_batch_size])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)),
                               targets[start:start + micro_batch_size].reshape(-1), ignore_index=ignore)
        loss.backward()
        total, k = total + loss.item(), k + 1
    return total / k
'''),
    Variant("M54-zero-grad-inside", "q6", note="clears .grad before accumulating", expect=("adding to it",), source='''
def accumulate_lm_gradients(model, batch, micro_batch_size, pad_id):
    model.zero_grad(set_to_none=True)
    inputs, targets = batch[:, :-1], batch[:, 1:]
    ignore = -100 if pad_id is None else pad_id
    n_real = int((targets != ignore).sum())
    total = 0.0
    for start in range(0, batch.shape[0], micro_batch_size):
        logits = model(inputs[start:start + micro_batch_size])
        summed = F.cross_entropy(logits.reshape(-1, logits.size(-1)),
                                 targets[start:start + micro_batch_size].reshape(-1),
                                 ignore_index=ignore, reduction="sum")
        (summed / n_real).backward()
        total += summed.item()
    return total / n_real
'''),
    Variant("M18-one-backward", "q6", note="graph-connected sum, one backward at the end", expect=("once per microbatch",),
            source='''
def accumulate_lm_gradients(model, batch, micro_batch_size, pad_id):
    inputs, targets = batch[:, :-1], batch[:, 1:]
    ignore = -100 if pad_id is None else pad_id
    n_real = int((targets != ignore).sum())
    total = 0
    for start in range(0, batch.shape[0], micro_batch_size):
        logits = model(inputs[start:start + micro_batch_size])
        total = total + F.cross_entropy(logits.reshape(-1, logits.size(-1)),
                                        targets[start:start + micro_batch_size].reshape(-1),
                                        ignore_index=ignore, reduction="sum")
    (total / n_real).backward()
    return total.item() / n_real
'''),
    Variant("M58-ppl-base-2", "q6", note="perplexity as 2 ** loss (nats)", expect=("2 ** loss",), source='''
def perplexity(logits, targets, pad_id=None):
    return 2.0 ** lm_loss(logits, targets, pad_id).item()
'''),
    # correct alternatives keep full marks
    Variant("gather-mask", "q6", correct=True, note="manual log_softmax().gather() with a mask", source='''
def lm_loss(logits, targets, pad_id=None):
    logp = F.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    mask = torch.ones_like(targets, dtype=torch.bool) if pad_id is None else targets != pad_id
    return -(logp * mask).sum() / mask.sum()
'''),
    Variant("nll-loss", "q6", correct=True, note="F.nll_loss on log_softmax, sum over count", source='''
def lm_loss(logits, targets, pad_id=None):
    logp = F.log_softmax(logits, dim=-1).reshape(-1, logits.size(-1))
    flat = targets.reshape(-1)
    if pad_id is None:
        return F.nll_loss(logp, flat)
    return F.nll_loss(logp, flat, ignore_index=pad_id, reduction="sum") / (flat != pad_id).sum()
'''),
    Variant("class-axis", "q6", correct=True, note="cross_entropy with the class axis moved to dim 1", source='''
def lm_loss(logits, targets, pad_id=None):
    if pad_id is None:
        return F.cross_entropy(logits.transpose(1, 2), targets)
    return F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=pad_id)
'''),
    Variant("acc-mask", "q6", correct=True, note="accumulation with an explicit mask and log_softmax", source='''
def accumulate_lm_gradients(model, batch, micro_batch_size, pad_id):
    inputs, targets = shift_for_next_token(batch)
    mask = torch.ones_like(targets, dtype=torch.bool) if pad_id is None else targets != pad_id
    n = mask.sum()
    total = 0.0
    for idx in torch.arange(batch.shape[0]).split(micro_batch_size):
        logp = F.log_softmax(model(inputs[idx]), dim=-1).gather(-1, targets[idx].unsqueeze(-1)).squeeze(-1)
        piece = -(logp * mask[idx]).sum()
        (piece / n).backward()
        total += piece.item()
    return total / n.item()
'''),
]

# issue 10: dividing each microbatch mean by K is named as that
_ACC_HEAD = '''
def accumulate_lm_gradients(model, batch, micro_batch_size, pad_id):
    inputs, targets = batch[:, :-1], batch[:, 1:]
    chunks = list(zip(inputs.split(micro_batch_size), targets.split(micro_batch_size)))
    K = len(chunks)
    total = 0.0
    for xb, yb in chunks:
        logits = model(xb)
        V = logits.shape[-1]
'''
VARIANTS += [
    Variant("M30-mean-over-k", "q6", note="each microbatch's token mean divided by K", expect=("number of microbatches",),
            source=_ACC_HEAD + '''
        loss = F.cross_entropy(logits.reshape(-1, V), yb.reshape(-1),
                               ignore_index=-100 if pad_id is None else pad_id) / K
        loss.backward()
        total += loss.item()
    return total
'''),
    Variant("M30-mean-over-k-masked", "q6", note="masked mean per microbatch, averaged over microbatches",
            expect=("number of microbatches",), source=_ACC_HEAD + '''
        mask = torch.ones_like(yb, dtype=torch.bool) if pad_id is None else yb != pad_id
        nll = -torch.log_softmax(logits, -1).gather(-1, yb.unsqueeze(-1)).squeeze(-1)
        loss = (nll[mask].sum() / mask.sum().clamp(min=1)) / K
        loss.backward()
        total += loss.item()
    return total
'''),
    Variant("acc-global-count-sum", "q6", correct=True, note="count first, reduction='sum', int division guard",
            source=_ACC_HEAD + '''
        if pad_id is None:
            n_all = targets.numel()
            s = F.cross_entropy(logits.flatten(0, 1), yb.flatten(), reduction="sum")
        else:
            n_all = int((targets != pad_id).sum())
            s = F.cross_entropy(logits.flatten(0, 1), yb.flatten(), reduction="sum", ignore_index=pad_id)
        (s / n_all).backward()
        total += s.item() / n_all
    return total
'''),
    Variant("acc-token-share", "q6", correct=True, note="microbatch token mean weighted by its token share",
            source=_ACC_HEAD + '''
        real = torch.ones_like(yb, dtype=torch.bool) if pad_id is None else yb != pad_id
        n_real_all = targets.numel() if pad_id is None else (targets != pad_id).sum().item()
        n_here = int(real.sum())
        if n_here == 0:
            continue
        nll = F.cross_entropy(logits.transpose(1, 2), yb, reduction="none")
        mean_here = nll[real].mean()
        (mean_here * (n_here / n_real_all)).backward()
        total += mean_here.item() * n_here / n_real_all
    return total
'''),
]
