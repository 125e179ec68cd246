from otter.test_files import test_case

OK_FORMAT = False

name = "q7"
points = 8

@test_case(points=0, hidden=False)
def test_surprisal_bits_example(surprisal_bits, worst_token):
    import math
    import torch
    logits = torch.zeros(1, 3, 2)
    targets = torch.tensor([[0, 1, 1]])
    bits = surprisal_bits(logits, targets)
    assert isinstance(bits, torch.Tensor) and tuple(bits.shape) == (3,), 'one surprisal per target, a 1-D tensor'
    assert torch.allclose(bits, torch.ones(3)), f'p = 1/2 costs 1 bit, got {bits.tolist()}'
    assert tuple(surprisal_bits(logits, targets, pad_id=0).shape) == (2,), 'targets equal to pad_id are left out'
    logits[0, 1, 0] = 3.0
    b, t, worst = worst_token(logits, targets)
    assert (b, t) == (0, 1), f'the costliest target is at (batch 0, time 1), got {(b, t)}'
    assert abs(worst + math.log2(1 / (1 + math.exp(3.0)))) < 1e-05, 'bits of the costliest target'

@test_case(points=0, hidden=False)
def test_plot_surprisal_returns_figure(plot_surprisal):
    import matplotlib.pyplot as plt
    import torch
    from matplotlib.figure import Figure
    fig = plot_surprisal(torch.tensor([1.0, 2.5, 0.5]), labels=['a', 'b', 'c'])
    try:
        assert isinstance(fig, Figure), f'return the matplotlib Figure, got {type(fig).__name__}'
    finally:
        plt.close('all')

