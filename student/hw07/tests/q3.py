from otter.test_files import test_case

OK_FORMAT = False

name = "q3"
points = 8

@test_case(points=0, hidden=False)
def test_broadcast_shape_examples(broadcast_shape):
    assert tuple(broadcast_shape((3, 1), (3,))) == (3, 3), '(3, 1) with (3,): compare from the right, 1 stretches'
    assert tuple(broadcast_shape((2, 3, 4), (4,))) == (2, 3, 4), 'a (d,) bias broadcasts over (B, T, d)'
    try:
        broadcast_shape((2, 3), (3, 2))
    except ValueError:
        pass
    else:
        raise AssertionError('(2, 3) and (3, 2) are incompatible: raise ValueError')

@test_case(points=0, hidden=False)
def test_pointwise_mse_handout_example(pointwise_mse):
    import torch
    loss = pointwise_mse(torch.tensor([[10.0], [20.0], [30.0]]), torch.tensor([11.0, 22.0, 33.0]))
    assert isinstance(loss, torch.Tensor) and loss.dim() == 0, 'the loss is a 0-dim tensor'
    assert abs(loss.item() - 14 / 3) < 1e-05, f"the handout's example gives 14/3, got {loss.item()}"

@test_case(points=0, hidden=False)
def test_matmul_shape_example(matmul_shape, broadcast_bug_minimizer):
    import torch
    assert tuple(matmul_shape((32, 10, 3, 4), (10, 4, 5))) == (32, 10, 3, 5), "the handout's example: (32, 10, 3, 5)"
    out = broadcast_bug_minimizer(torch.tensor([11.0, 22.0, 33.0]))
    assert tuple(out.shape) == (3,), 'one prediction per example'

