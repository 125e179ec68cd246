"""q3 variants: the spec's misconceptions M11-M14 and correct alternatives."""
from coursekit.harness import Variant

VARIANTS = [
    Variant("M11", "q3", note="(B,1) - (B,) broadcast to (B, B)", expect=("every prediction with every target",),
            source='''
def pointwise_mse(predictions, targets):
    return (predictions - targets).square().mean()
'''),
    Variant("M12", "q3", note="squeeze() instead of squeeze(-1)", expect=("squeeze(-1)",), source='''
def pointwise_mse(predictions, targets):
    p, t = predictions.squeeze(), targets.squeeze()
    if p.dim() != 1 or p.shape != t.shape:
        raise ValueError(f"shapes {tuple(predictions.shape)} and {tuple(targets.shape)} do not pair up")
    return (p - t).square().mean()
'''),
    Variant("M13", "q3", note="left-aligned shape comparison", expect=("from the left",), source='''
def broadcast_shape(a, b):
    a, b = tuple(a), tuple(b)
    rank = max(len(a), len(b))
    a = a + (1,) * (rank - len(a))
    b = b + (1,) * (rank - len(b))
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise ValueError(f"{a} vs {b}")
        out.append(y if x == 1 else x)
    return tuple(out)
'''),
    Variant("M14", "q3", note="mismatched shapes silently accepted", expect=("raise ValueError",), source='''
def pointwise_mse(predictions, targets):
    return (predictions.reshape(-1) - targets.reshape(-1)).square().mean() if predictions.numel() == targets.numel() else (predictions.reshape(-1, 1) - targets.reshape(-1)).square().mean()
'''),
    Variant("M14-message", "q3", note="ValueError without the shapes", expect=("show both shapes",), source='''
def pointwise_mse(predictions, targets):
    def per_example(x):
        if x.dim() == 2 and x.shape[-1] == 1:
            return x.squeeze(-1)
        return x if x.dim() == 1 else None
    p, t = per_example(predictions), per_example(targets)
    if p is None or t is None or p.shape != t.shape:
        raise ValueError("shapes do not match")
    return (p - t).square().mean()
'''),
    Variant("M41-zero-size", "q3", note="size 0 treated like size 1", expect=("size 0",), source='''
def broadcast_shape(a, b):
    a, b = tuple(a), tuple(b)
    rank = max(len(a), len(b))
    a = (1,) * (rank - len(a)) + a
    b = (1,) * (rank - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y) and 0 not in (x, y):
            raise ValueError(f"{a} vs {b}")
        out.append(max(x, y))
    return tuple(out)
'''),
    Variant("M43-minimizer-targets", "q3", note="returns the intended minimizer", expect=("mean target",), source='''
def broadcast_bug_minimizer(targets):
    return targets.clone()
'''),
    Variant("M44-matmul-no-broadcast", "q3", note="leading dims taken from A only", expect=("leading dimensions broadcast",),
            source='''
def matmul_shape(a, b):
    a, b = tuple(a), tuple(b)
    if a[-1] != b[-2]:
        raise ValueError(f"{a} @ {b}")
    return a[:-1] + (b[-1],)
'''),
    # correct alternatives keep full marks
    Variant("shape-check-assert-style", "q3", correct=True, source='''
def pointwise_mse(predictions, targets):
    shapes_ok = predictions.shape[:1] == targets.shape[:1] and all(
        x.dim() == 1 or (x.dim() == 2 and x.shape[1] == 1) for x in (predictions, targets))
    if not shapes_ok:
        raise ValueError(f"cannot pair predictions {list(predictions.shape)} with targets {list(targets.shape)}")
    return F.mse_loss(predictions.reshape(-1), targets.reshape(-1))
'''),
    Variant("targets-unsqueezed", "q3", correct=True, source='''
def pointwise_mse(predictions, targets):
    if predictions.dim() not in (1, 2) or targets.dim() not in (1, 2):
        raise ValueError(f"predictions {predictions.shape} vs targets {targets.shape}")
    p = predictions if predictions.dim() == 2 else predictions[:, None]
    t = targets if targets.dim() == 2 else targets[:, None]
    if p.dim() != 2 or t.dim() != 2 or p.shape[1] != 1 or t.shape[1] != 1 or p.shape != t.shape \\
            or predictions.dim() > 2 or targets.dim() > 2:
        raise ValueError(f"predictions {predictions.shape} vs targets {targets.shape}")
    return (p - t).square().mean()
'''),
    Variant("broadcast-via-torch-loop", "q3", correct=True, source='''
def broadcast_shape(a, b):
    import itertools
    out = []
    for x, y in itertools.zip_longest(reversed(tuple(a)), reversed(tuple(b)), fillvalue=1):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise ValueError("incompatible")
    return tuple(reversed(out))
'''),
]
