from otter.test_files import test_case

OK_FORMAT = False

name = "q5"
points = 10

@test_case(points=0, hidden=False)
def test_accumulate_handout_example(accumulate_gradients):
    import copy
    import torch
    import torch.nn.functional as F
    torch.manual_seed(5)
    full = torch.nn.Linear(3, 2).double()
    small = copy.deepcopy(full)
    x = torch.randn(5, 3, dtype=torch.float64)
    y = torch.tensor([0, 1, 0, 1, 1])
    F.cross_entropy(full(x), y).backward()
    loss = accumulate_gradients(small, x, y, 2)
    assert isinstance(loss, float), f'return the full-batch mean loss as a Python float, got {type(loss).__name__}'
    for a, b in zip(full.parameters(), small.parameters()):
        assert b.grad is not None and torch.allclose(a.grad, b.grad), "gradients differ from the full batch's"

@test_case(points=0, hidden=False)
def test_checkpointed_forward_output(checkpointed_forward):
    import torch
    torch.manual_seed(0)
    blocks = [torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh()) for _ in range(3)]
    x = torch.randn(2, 4)
    expected = blocks[2](blocks[1](blocks[0](x)))
    out = checkpointed_forward(blocks, x)
    assert torch.allclose(out, expected), 'the output should equal running the blocks in order'
    assert out.requires_grad, 'the output should carry a graph for backward'

