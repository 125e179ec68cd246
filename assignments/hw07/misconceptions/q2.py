"""q2 variants: the spec's misconceptions M9, M10 and correct alternatives."""
from coursekit.harness import Variant

VARIANTS = [
    Variant("M9", "q2", note="X @ W instead of X @ W.T", expect=("X @ W.T",), source='''
def batched_linear(X, W, b):
    return X @ W + b
'''),
    Variant("M10", "q2", note="embedding axes swapped", expect=("swapped",), source='''
def embed(token_ids, table):
    return table[token_ids].transpose(0, 1)
'''),
    Variant("M10-square", "q2", note="axes swapped only in the values (permute ids first)", expect=("swapped",), source='''
def embed(token_ids, table):
    return table[token_ids.T.contiguous().view(token_ids.shape)] if token_ids.shape[0] == token_ids.shape[1] else table[token_ids]
'''),
    Variant("M39-loop-embed", "q2", note="Python loop over tokens", expect=("loop",), source='''
def embed(token_ids, table):
    return torch.stack([torch.stack([table[int(i)] for i in row]) for row in token_ids])
'''),
    Variant("M40-flops", "q2", note="counts FLOPs, not MACs", expect=("multiply-accumulate",), source='''
def linear_macs(B, T, d, h):
    return 2 * B * T * d * h
'''),
    # correct alternatives keep full marks
    Variant("F.embedding", "q2", correct=True, source='''
def embed(token_ids, table):
    return F.embedding(token_ids, table)
'''),
    Variant("one-hot", "q2", correct=True, source='''
def embed(token_ids, table):
    return F.one_hot(token_ids, table.shape[0]).to(table.dtype) @ table
'''),
    Variant("einsum", "q2", correct=True, source='''
def batched_linear(X, W, b):
    return torch.einsum("...d,hd->...h", X, W) + b
'''),
    Variant("F.linear", "q2", correct=True, source='''
def batched_linear(X, W, b):
    return F.linear(X, W, b)
'''),
]
