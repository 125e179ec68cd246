from otter.test_files import test_case

OK_FORMAT = False

name = "q6"
points = 12

@test_case(points=0, hidden=False)
def test_shift_example(shift_for_next_token):
    import torch
    inputs, targets = shift_for_next_token(torch.tensor([[5, 9, 2, 7, 4]]))
    assert inputs.tolist() == [[5, 9, 2, 7]], f'inputs drop the last token: expected [[5, 9, 2, 7]], got {inputs.tolist()}'
    assert targets.tolist() == [[9, 2, 7, 4]], f'targets drop the first token: expected [[9, 2, 7, 4]], got {targets.tolist()}'

@test_case(points=0, hidden=False)
def test_lm_loss_handout_example(lm_loss, perplexity):
    import math
    import torch
    V = 16
    targets = torch.tensor([[1] * 23 + [0] * 17])
    p = torch.tensor([1 / 12.7] * 23 + [0.999] * 17, dtype=torch.float64)
    probs = ((1 - p) / (V - 1))[:, None].repeat(1, V)
    probs[torch.arange(40), targets[0]] = p
    logits = probs.log()[None]
    loss = lm_loss(logits, targets, pad_id=0)
    assert isinstance(loss, torch.Tensor) and loss.dim() == 0, 'lm_loss returns a 0-dim tensor'
    assert abs(loss.item() - math.log(12.7)) < 1e-08, f'masked loss should be log(12.7) = {math.log(12.7):.6f}, got {loss.item():.6f}'
    ppl = perplexity(logits, targets, pad_id=0)
    assert isinstance(ppl, float), f'perplexity returns a Python float, got {type(ppl).__name__}'
    assert abs(ppl - 12.7) < 1e-06, f'real-target perplexity is 12.7, got {ppl}'
    assert 4.3 < perplexity(logits, targets) < 4.4, 'with pad_id=None every target counts: about 4.31'

@test_case(points=0, hidden=False)
def test_accumulate_lm_gradients_runs(accumulate_lm_gradients):
    import torch
    from torch import nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(5, 3), nn.Linear(3, 5)).double()
    batch = torch.tensor([[1, 2, 3, 4], [2, 3, 0, 0], [4, 1, 2, 0]])
    loss = accumulate_lm_gradients(model, batch, 2, 0)
    assert isinstance(loss, float), f"return the batch's mean loss as a Python float, got {type(loss).__name__}"
    assert all((p.grad is not None for p in model.parameters())), 'every parameter should have a .grad after the call'

