"""q5 variants: the spec's misconceptions M18-M23, other slips, and correct alternatives."""
from coursekit.harness import Variant

VARIANTS = [
    Variant("M18", "q5", note="graph-connected losses summed, one backward (right numbers)",
            expect=("grows with the number of microbatches", "backward() on each microbatch"), source='''
def accumulate_gradients(model, x, y, micro_batch_size, loss_fn=F.cross_entropy):
    total = 0
    for xb, yb in zip(x.split(micro_batch_size), y.split(micro_batch_size)):
        total = total + loss_fn(model(xb), yb) * (len(xb) / len(x))
    total.backward()
    return total.item()
'''),
    Variant("M18-list", "q5", note="losses kept in a list, one backward on their sum",
            expect=("grows with the number of microbatches",), source='''
def accumulate_gradients(model, x, y, micro_batch_size, loss_fn=F.cross_entropy):
    losses = [loss_fn(model(xb), yb) * len(xb) for xb, yb in
              zip(x.split(micro_batch_size), y.split(micro_batch_size))]
    loss = torch.stack(losses).sum() / len(x)
    loss.backward()
    return loss.item()
'''),
    Variant("M19", "q5", note="each microbatch mean divided by K (uneven microbatches)",
            expect=("number of microbatches K", "uneven"), source='''
def accumulate_gradients(model, x, y, micro_batch_size, loss_fn=F.cross_entropy):
    chunks = list(zip(x.split(micro_batch_size), y.split(micro_batch_size)))
    total = 0.0
    for xb, yb in chunks:
        loss = loss_fn(model(xb), yb) / len(chunks)
        loss.backward()
        total += loss.item()
    return total
'''),
    Variant("M20", "q5", note="microbatch means added without division", expect=("without dividing",), source='''
def accumulate_gradients(model, x, y, micro_batch_size, loss_fn=F.cross_entropy):
    total = 0.0
    for xb, yb in zip(x.split(micro_batch_size), y.split(micro_batch_size)):
        loss = loss_fn(model(xb), yb)
        loss.backward()
        total += loss.item() * len(xb) / len(x)
    return total
'''),
    Variant("M20-sum", "q5", note="summed losses, never divided by N", expect=("accumulate_gradients",), source='''
def accumulate_gradients(model, x, y, micro_batch_size, loss_fn=F.cross_entropy):
    total = 0.0
    for xb, yb in zip(x.split(micro_batch_size), y.split(micro_batch_size)):
        loss = loss_fn(model(xb), yb, reduction="sum")
        loss.backward()
        total += loss.item()
    return total / len(x)
'''),
    Variant("M21-clear-in-loop", "q5", note="gradients cleared inside the loop", expect=("cleared inside the loop",),
            source='''
def accumulate_gradients(model, x, y, micro_batch_size, loss_fn=F.cross_entropy):
    total = 0.0
    for xb, yb in zip(x.split(micro_batch_size), y.split(micro_batch_size)):
        model.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb, reduction="sum") / len(x)
        loss.backward()
        total += loss.item()
    return total
'''),
    Variant("M21-step-in-loop", "q5", note="optimizer steps after every microbatch", expect=("times for one update",),
            source='''
def accumulated_train_step(model, optimizer, x, y, micro_batch_size, loss_fn=F.cross_entropy):
    optimizer.zero_grad(set_to_none=True)
    total = 0.0
    for xb, yb in zip(x.split(micro_batch_size), y.split(micro_batch_size)):
        loss = loss_fn(model(xb), yb, reduction="sum") / len(x)
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total
'''),
    Variant("M1-no-clear-before", "q5", note="accumulated_train_step does not clear first", expect=("clear the gradients first",),
            source='''
def accumulated_train_step(model, optimizer, x, y, micro_batch_size, loss_fn=F.cross_entropy):
    loss = accumulate_gradients(model, x, y, micro_batch_size, loss_fn)
    optimizer.step()
    return loss
'''),
    Variant("M54-replaces-grads", "q5", note="accumulate_gradients clears existing gradients first", expect=("add to",),
            source='''
def accumulate_gradients(model, x, y, micro_batch_size, loss_fn=F.cross_entropy):
    model.zero_grad(set_to_none=True)
    total = 0.0
    for xb, yb in zip(x.split(micro_batch_size), y.split(micro_batch_size)):
        loss = loss_fn(model(xb), yb, reduction="sum") / len(x)
        loss.backward()
        total += loss.item()
    return total
'''),
    Variant("M22", "q5", note="microbatch forward under no_grad", expect=("no_grad",), source='''
def accumulate_gradients(model, x, y, micro_batch_size, loss_fn=F.cross_entropy):
    total = 0.0
    for xb, yb in zip(x.split(micro_batch_size), y.split(micro_batch_size)):
        with torch.no_grad():
            out = model(xb)
        loss = loss_fn(out, yb, reduction="sum") / len(x)
        loss.backward()
        total += loss.item()
    return total
'''),
    Variant("M22-requires-grad", "q5", note="no_grad forward, loss forced to require grad", expect=("no_grad",),
            source='''
def accumulate_gradients(model, x, y, micro_batch_size, loss_fn=F.cross_entropy):
    total = 0.0
    for xb, yb in zip(x.split(micro_batch_size), y.split(micro_batch_size)):
        with torch.no_grad():
            loss = loss_fn(model(xb), yb, reduction="sum") / len(x)
        loss.requires_grad_(True)
        loss.backward()
        total += loss.item()
    return total
'''),
    Variant("M55-full-batch-forward", "q5", note="one forward on the whole batch", expect=("one microbatch at a time",),
            source='''
def accumulate_gradients(model, x, y, micro_batch_size, loss_fn=F.cross_entropy):
    loss = loss_fn(model(x), y)
    loss.backward()
    return loss.item()
'''),
    Variant("M23", "q5", note="checkpoint wrapped around an identity, blocks run plainly",
            expect=("as much as after the plain forward", "use_reentrant=False"), source='''
def checkpointed_forward(blocks, x):
    for block in blocks:
        x = checkpoint(lambda h: h, block(x), use_reentrant=False)
    return x
'''),
    Variant("M23-plain", "q5", note="no checkpointing at all", expect=("still alive",), source='''
def checkpointed_forward(blocks, x):
    for block in blocks:
        x = block(x)
    return x
'''),
    Variant("M56-reentrant", "q5", note="use_reentrant=True with an input that needs no grad",
            expect=("use_reentrant=False",), source='''
def checkpointed_forward(blocks, x):
    for block in blocks:
        x = checkpoint(block, x, use_reentrant=True)
    return x
'''),
    # correct alternatives keep full marks
    Variant("mean-times-fraction", "q5", correct=True, note="mean loss weighted by len(xb)/N", source='''
def accumulate_gradients(model, x, y, micro_batch_size, loss_fn=F.cross_entropy):
    n = x.shape[0]
    total = 0.0
    for start in range(0, n, micro_batch_size):
        xb, yb = x[start:start + micro_batch_size], y[start:start + micro_batch_size]
        loss = loss_fn(model(xb), yb) * (len(xb) / n)
        loss.backward()
        total += loss.item()
    return total
'''),
    Variant("model-zero_grad", "q5", correct=True, note="model.zero_grad() to clear", source='''
def accumulated_train_step(model, optimizer, x, y, micro_batch_size, loss_fn=F.cross_entropy):
    model.zero_grad()
    loss = accumulate_gradients(model, x, y, micro_batch_size, loss_fn=loss_fn)
    optimizer.step()
    return float(loss)
'''),
    Variant("checkpoint_sequential", "q5", correct=True, note="checkpoint_sequential, one segment per block", source='''
def checkpointed_forward(blocks, x):
    from torch.utils.checkpoint import checkpoint_sequential
    blocks = list(blocks)
    return checkpoint_sequential(blocks, len(blocks), x, use_reentrant=False)
'''),
    Variant("whole-sequence-checkpoint", "q5", correct=True, note="one checkpoint around all blocks (saves even less)",
            source='''
def checkpointed_forward(blocks, x):
    def run(h):
        for block in blocks:
            h = block(h)
        return h
    return checkpoint(run, x, use_reentrant=False)
'''),
]

# issue 10: the goal is the full-batch mean loss (MSE on (B, k) targets too); detaching between
# checkpointed blocks is named as such, not blamed on use_reentrant
VARIANTS += [
    Variant("M53-sum-over-n", "q5", note="reduction='sum' / N (wrong for (B, k) targets)", expect=("share",),
            source='''
def accumulate_gradients(model, x, y, micro_batch_size, loss_fn=F.cross_entropy):
    total = 0.0
    for xb, yb in zip(x.split(micro_batch_size), y.split(micro_batch_size)):
        loss = loss_fn(model(xb), yb, reduction="sum") / len(x)
        loss.backward()
        total += loss.item()
    return total
'''),
    Variant("M53-sum-times-share", "q5", note="sum per microbatch over len(xb), times len(xb)/N",
            expect=("share",), source='''
def accumulate_gradients(model, x, y, micro_batch_size, loss_fn=F.cross_entropy):
    n, total = x.shape[0], 0.0
    for start in range(0, n, micro_batch_size):
        xb, yb = x[start:start + micro_batch_size], y[start:start + micro_batch_size]
        loss = loss_fn(model(xb), yb, reduction="sum") / len(xb) * (len(xb) / n)
        loss.backward()
        total += float(loss)
    return total
'''),
    Variant("share-by-numel", "q5", correct=True, note="sum over all elements divided by y.numel()", source='''
def accumulate_gradients(model, x, y, micro_batch_size, loss_fn=F.cross_entropy):
    total = 0.0
    per_example = y[0].numel()
    for xb, yb in zip(torch.split(x, micro_batch_size), torch.split(y, micro_batch_size)):
        if per_example > 1 or yb.dtype.is_floating_point:
            loss = loss_fn(model(xb), yb, reduction="sum") / (len(x) * per_example)
        else:
            loss = loss_fn(model(xb), yb, reduction="sum") / len(x)
        loss.backward()
        total += loss.item()
    return total
'''),
    Variant("share-index-loop", "q5", correct=True, note="index ranges, float64 share, tensor total", source='''
def accumulate_gradients(model, x, y, micro_batch_size, loss_fn=F.cross_entropy):
    N = len(x)
    total = torch.zeros((), dtype=torch.float64)
    starts = list(range(0, N, micro_batch_size))
    for s in starts:
        e = min(s + micro_batch_size, N)
        share = (e - s) / N
        loss = loss_fn(model(x[s:e]), y[s:e])
        (loss * share).backward()
        total += loss.detach().double() * share
    return total.item()
'''),
    Variant("M57-detach-between", "q5", note="detaches each block's output", expect=("detach",), source='''
def checkpointed_forward(blocks, x):
    for block in blocks:
        x = checkpoint(block, x.detach(), use_reentrant=False)
    return x
'''),
    Variant("M57-rebuilt-tensor", "q5", note="rebuilds the tensor from its values between blocks",
            expect=("detach",), source='''
def checkpointed_forward(blocks, x):
    h = x
    for i, block in enumerate(blocks):
        if i > 0:
            h = h.clone().detach().requires_grad_(False)
        h = checkpoint(block, h, use_reentrant=False)
    return h
'''),
    Variant("M56-reentrant-explicit", "q5", note="use_reentrant=True spelled out", expect=("use_reentrant=False",),
            source='''
def checkpointed_forward(blocks, x):
    out = x
    for block in blocks:
        out = checkpoint(block, out, use_reentrant=True)
    return out
'''),
    Variant("ckpt-while-iter", "q5", correct=True, note="iterator and a while loop, preserve_rng_state off", source='''
def checkpointed_forward(blocks, x):
    it = iter(blocks)
    while True:
        block = next(it, None)
        if block is None:
            return x
        x = checkpoint(block, x, use_reentrant=False, preserve_rng_state=False)
'''),
    Variant("ckpt-functools-reduce", "q5", correct=True, note="functools.reduce over the blocks", source='''
def checkpointed_forward(blocks, x):
    import functools
    return functools.reduce(lambda h, block: checkpoint(block, h, use_reentrant=False), list(blocks), x)
'''),
]
