from otter.test_files import test_case

OK_FORMAT = False

name = "q2"
points = 6

@test_case(points=0, hidden=False)
def test_embed_worked_example(embed):
    import torch
    table = torch.arange(12.0).reshape(4, 3)
    out = embed(torch.tensor([[0, 3], [1, 1]]), table)
    assert isinstance(out, torch.Tensor), f'embed should return a tensor, got {type(out).__name__}'
    assert tuple(out.shape) == (2, 2, 3), f'embed should return (B, T, d) = (2, 2, 3), got {tuple(out.shape)}'
    assert out[0, 1].tolist() == [9.0, 10.0, 11.0], 'out[b, t] should be table[token_ids[b, t]]'

@test_case(points=0, hidden=False)
def test_batched_linear_shapes(batched_linear):
    import torch
    W, b = (torch.ones(5, 4), torch.zeros(5))
    for lead in [(2, 3), (7,), (2, 2, 2)]:
        out = batched_linear(torch.ones(*lead, 4), W, b)
        assert tuple(out.shape) == lead + (5,), f'X of shape {lead + (4,)} should give {lead + (5,)}, got {tuple(out.shape)}'
    assert torch.allclose(out, torch.full(out.shape, 4.0)), "with W all ones and b = 0, each output is the sum of x's 4 entries"

@test_case(points=0, hidden=False)
def test_linear_macs_example(linear_macs):
    assert linear_macs(2, 3, 4, 5) == 120, "the handout's example: B·T·d·h = 2·3·4·5"

