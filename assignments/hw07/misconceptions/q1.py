"""q1 variants: the spec's misconceptions M1-M8 and correct alternatives."""
from coursekit.harness import Variant

VARIANTS = [
    Variant("M1", "q1", note="gradients never cleared", expect=("accumulate across calls",), source='''
def train_step(model, optimizer, loss_fn, x, y):
    model.train()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()
'''),
    Variant("M1-after-step", "q1", note="cleared only after step()", expect=("before backward()",), source='''
def train_step(model, optimizer, loss_fn, x, y):
    model.train()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.item()
'''),
    Variant("M2", "q1", note="cleared after backward, before step", expect=("did not change the parameters",),
            source='''
def train_step(model, optimizer, loss_fn, x, y):
    model.train()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.zero_grad(set_to_none=True)
    optimizer.step()
    return loss.item()
'''),
    Variant("M3", "q1", note="returns the loss tensor", expect=("returned a torch.Tensor", "graph"), source='''
def train_step(model, optimizer, loss_fn, x, y):
    model.train()
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss
'''),
    Variant("M3-detach", "q1", note="returns loss.detach() (a tensor)", expect=("loss.item()",), source='''
def train_step(model, optimizer, loss_fn, x, y):
    model.train()
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach()
'''),
    Variant("M34-no-train-mode", "q1", note="train_step never calls model.train()", expect=("model.train()",), source='''
def train_step(model, optimizer, loss_fn, x, y):
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()
'''),
    Variant("M35-zero-in-place", "q1", note="zero_grad(set_to_none=False)", expect=("set_to_none",), source='''
def train_step(model, optimizer, loss_fn, x, y):
    model.train()
    optimizer.zero_grad(set_to_none=False)
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()
'''),
    Variant("M4", "q1", note="evaluate without no_grad (right numbers, graph built)",
            expect=("built a backward graph", "no_grad"), source='''
def evaluate(model, batches, loss_fn):
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for xb, yb in batches:
        total += loss_fn(model(xb), yb).item() * len(xb)
        count += len(xb)
    model.train(was_training)
    return total / count
'''),
    Variant("M4-kept-losses", "q1", note="no no_grad, loss tensors kept until the end",
            expect=("built a backward graph",), source='''
def evaluate(model, batches, loss_fn):
    was_training = model.training
    model.eval()
    losses, counts = [], []
    for xb, yb in batches:
        losses.append(loss_fn(model(xb), yb) * len(xb))
        counts.append(len(xb))
    model.train(was_training)
    return (sum(losses) / sum(counts)).item()
'''),
    Variant("M5", "q1", note="evaluate without eval(): dropout active", expect=("dropout", "model.eval()"), source='''
def evaluate(model, batches, loss_fn):
    total, count = 0.0, 0
    with torch.no_grad():
        for xb, yb in batches:
            total += loss_fn(model(xb), yb).item() * len(xb)
            count += len(xb)
    return total / count
'''),
    Variant("M6", "q1", note="mean of batch means", expect=("mean of the batch means",), source='''
def evaluate(model, batches, loss_fn):
    was_training = model.training
    model.eval()
    means = []
    with torch.no_grad():
        for xb, yb in batches:
            means.append(loss_fn(model(xb), yb).item())
    model.train(was_training)
    return sum(means) / len(means)
'''),
    Variant("M7", "q1", note="model left in eval mode", expect=("left the model in eval mode",), source='''
def evaluate(model, batches, loss_fn):
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for xb, yb in batches:
            total += loss_fn(model(xb), yb).item() * len(xb)
            count += len(xb)
    return total / count
'''),
    Variant("M7-always-train", "q1", note="train() afterwards, whatever the previous mode",
            expect=("previous",), source='''
def evaluate(model, batches, loss_fn):
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for xb, yb in batches:
            total += loss_fn(model(xb), yb).item() * len(xb)
            count += len(xb)
    model.train()
    return total / count
'''),
    Variant("M8", "q1", note="evaluate clears the gradients", expect=("cleared or changed the parameters' gradients",),
            source='''
def evaluate(model, batches, loss_fn):
    was_training = model.training
    model.eval()
    model.zero_grad(set_to_none=False)
    total, count = 0.0, 0
    with torch.no_grad():
        for xb, yb in batches:
            total += loss_fn(model(xb), yb).item() * len(xb)
            count += len(xb)
    model.train(was_training)
    return total / count
'''),
    Variant("M8-none", "q1", note="evaluate sets the gradients to None", expect=("gradients",), source='''
def evaluate(model, batches, loss_fn):
    was_training = model.training
    model.eval()
    for p in model.parameters():
        p.grad = None
    total, count = 0.0, 0
    with torch.no_grad():
        for xb, yb in batches:
            total += loss_fn(model(xb), yb).item() * len(xb)
            count += len(xb)
    model.train(was_training)
    return total / count
'''),
    Variant("M36-grad-mode-leak", "q1", note="set_grad_enabled(False) never restored", expect=("autograd is still disabled",),
            isolated=True,
            source='''
def evaluate(model, batches, loss_fn):
    was_training = model.training
    model.eval()
    torch.set_grad_enabled(False)
    total, count = 0.0, 0
    for xb, yb in batches:
        total += loss_fn(model(xb), yb).item() * len(xb)
        count += len(xb)
    model.train(was_training)
    return total / count
'''),
    Variant("M37-len-of-batches", "q1", note="len(batches): fails on a generator", expect=("generator",), source='''
def evaluate(model, batches, loss_fn):
    was_training = model.training
    model.eval()
    n = sum(len(xb) for xb, _ in batches) if len(batches) else 0
    total = 0.0
    with torch.no_grad():
        for xb, yb in batches:
            total += loss_fn(model(xb), yb).item() * len(xb) / n
    model.train(was_training)
    return total
'''),
    Variant("M38-eval-graph", "q1", note="believes eval() stops graph recording",
            expect=("does not stop autograd",), source='''
SWITCHES = {
    "model.eval()": {"forward behavior", "graph recording"},
    "model.train()": {"forward behavior"},
    "torch.no_grad()": {"graph recording"},
    "optimizer.zero_grad(set_to_none=True)": {"gradient buffers"},
    "loss.backward()": {"gradient buffers"},
    "optimizer.step()": {"parameters", "optimizer state"},
}
'''),
    Variant("M38-backward-updates", "q1", note="believes backward() updates the weights",
            expect=("weights change only at step()",), source='''
SWITCHES = {
    "model.eval()": {"forward behavior"},
    "model.train()": {"forward behavior"},
    "torch.no_grad()": {"graph recording"},
    "optimizer.zero_grad(set_to_none=True)": {"gradient buffers"},
    "loss.backward()": {"gradient buffers", "parameters"},
    "optimizer.step()": {"parameters", "optimizer state"},
}
'''),
    # correct alternatives keep full marks
    Variant("inference_mode", "q1", correct=True, source='''
def evaluate(model, batches, loss_fn):
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    with torch.inference_mode():
        for xb, yb in batches:
            total += loss_fn(model(xb), yb).item() * len(xb)
            count += len(xb)
    model.train(was_training)
    return total / count
'''),
    Variant("weighted-len-over-N", "q1", correct=True, note="loss weighted by len(xb)/N (one pass into a list)", source='''
def evaluate(model, batches, loss_fn):
    batches = list(batches)
    n = sum(len(xb) for xb, _ in batches)
    was_training = model.training
    model.eval()
    result = 0.0
    with torch.no_grad():
        for xb, yb in batches:
            result += loss_fn(model(xb), yb).item() * len(xb) / n
    model.train(was_training)
    return result
'''),
    Variant("tensor-sum-no_grad", "q1", correct=True, note="sums detached loss tensors, one .item() at the end", source='''
def evaluate(model, batches, loss_fn):
    was_training = model.training
    model.eval()
    total, count = torch.zeros(()), 0
    with torch.no_grad():
        for xb, yb in batches:
            total = total + loss_fn(model(xb), yb) * xb.shape[0]
            count += xb.shape[0]
    model.train(was_training)
    return float(total) / count
'''),
    Variant("set_grad_enabled-ctx", "q1", correct=True, note="torch.set_grad_enabled(False) as a context", source='''
def evaluate(model, batches, loss_fn):
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    with torch.set_grad_enabled(False):
        for xb, yb in batches:
            total += float(loss_fn(model(xb), yb)) * len(yb)
            count += len(yb)
    if was_training:
        model.train()
    return total / count
'''),
    Variant("zero_grad-default", "q1", correct=True, note="optimizer.zero_grad() with the default", source='''
def train_step(model, optimizer, loss_fn, x, y):
    model.train()
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return float(loss)
'''),
    Variant("grad-None-by-hand", "q1", correct=True, note="p.grad = None for each parameter, model.zero_grad first",
            source='''
def train_step(model, optimizer, loss_fn, x, y):
    model.train()
    for p in model.parameters():
        p.grad = None
    out = model(x)
    loss = loss_fn(out, y)
    loss.backward()
    optimizer.step()
    return loss.detach().item()
'''),
    Variant("switches-frozensets", "q1", correct=True, note="frozensets and lists", source='''
SWITCHES = {
    "model.eval()": frozenset({"forward behavior"}),
    "model.train()": {"forward behavior"},
    "torch.no_grad()": {"graph recording"},
    "optimizer.zero_grad(set_to_none=True)": {"gradient buffers"},
    "loss.backward()": {"gradient buffers"},
    "optimizer.step()": {"optimizer state", "parameters"},
}
'''),
]

# issue 10: evaluate's return type is stated (a Python float); the memory check judges memory only
VARIANTS += [
    Variant("M3-evaluate-tensor", "q1", note="evaluate returns a detached 0-dim tensor", expect=("Python float",),
            source='''
def evaluate(model, batches, loss_fn):
    was_training = model.training
    model.eval()
    total, count = torch.zeros((), dtype=torch.float64), 0
    with torch.no_grad():
        for xb, yb in batches:
            total += loss_fn(model(xb), yb) * len(xb)
            count += len(xb)
    model.train(was_training)
    return total / count
'''),
    Variant("M3-evaluate-graph-tensor", "q1", note="evaluate returns a tensor that keeps a graph",
            expect=("Python float",), source='''
def evaluate(model, batches, loss_fn):
    was_training = model.training
    model.eval()
    total, count = 0, 0
    for xb, yb in batches:
        total = total + loss_fn(model(xb), yb) * len(xb)
        count += len(xb)
    model.train(was_training)
    return total / count
'''),
    Variant("evaluate-float-of-tensor", "q1", correct=True, note="tensor accumulator, float() at the end", source='''
def evaluate(model, batches, loss_fn):
    previous = model.training
    model.train(False)
    with torch.inference_mode():
        total, count = torch.zeros((), dtype=torch.float64), 0
        for xb, yb in batches:
            total += loss_fn(model(xb), yb).double() * xb.shape[0]
            count += xb.shape[0]
    model.train(previous)
    return float(total / count)
'''),
    Variant("evaluate-numpy-float", "q1", correct=True, note="numpy average with weights (a float subclass)", source='''
def evaluate(model, batches, loss_fn):
    import numpy as np
    mode = model.training
    model.eval()
    means, sizes = [], []
    try:
        with torch.no_grad():
            for xb, yb in batches:
                means.append(loss_fn(model(xb), yb).item())
                sizes.append(len(yb))
    finally:
        model.train(mode)
    return float(np.average(means, weights=sizes))
'''),
    Variant("M35-zero-grad-false", "q1", note="model.zero_grad(set_to_none=False) before backward",
            expect=("set_to_none",), source='''
def train_step(model, optimizer, loss_fn, x, y):
    model.train()
    model.zero_grad(set_to_none=False)
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()
'''),
    Variant("M35-grad-zero_", "q1", note="p.grad.zero_() by hand", expect=("set_to_none",), source='''
def train_step(model, optimizer, loss_fn, x, y):
    model.train()
    for p in model.parameters():
        if p.grad is not None:
            p.grad.zero_()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()
'''),
    Variant("train-step-float-cast", "q1", correct=True, note="float(loss) and a per-group set_to_none", source='''
def train_step(model, optimizer, loss_fn, x, y):
    model.train(True)
    for group in optimizer.param_groups:
        for p in group["params"]:
            p.grad = None
    out = model(x)
    loss = loss_fn(out, y)
    loss.backward()
    optimizer.step()
    return float(loss.detach())
'''),
    Variant("switches-adam-tuples", "q1", correct=True, note="keys in another order", source='''
SWITCHES = {
    "optimizer.step()": {"optimizer state", "parameters"},
    "loss.backward()": {"gradient buffers"},
    "optimizer.zero_grad(set_to_none=True)": {"gradient buffers"},
    "torch.no_grad()": {"graph recording"},
    "model.train()": {"forward behavior"},
    "model.eval()": {"forward behavior"},
}
'''),
]
