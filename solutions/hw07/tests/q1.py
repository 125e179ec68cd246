from otter.test_files import test_case

OK_FORMAT = False

name = "q1"
points = 10

@test_case(points=0, hidden=False)
def test_train_step_returns_float(train_step):
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = (torch.randn(4, 3), torch.randn(4, 1))
    before = model.weight.detach().clone()
    loss = train_step(model, optimizer, F.mse_loss, x, y)
    assert isinstance(loss, float), f'train_step should return a Python float (loss.item()), got {type(loss).__name__}'
    assert not torch.equal(model.weight, before), 'train_step should update the parameters'

@test_case(points=0, hidden=False)
def test_evaluate_example(evaluate):
    import torch
    import torch.nn.functional as F
    model = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(1.0)
    model.train()
    x = torch.tensor([[1.0], [2.0], [3.0]])
    batches = [(x[:2], torch.zeros(2, 1)), (x[2:], torch.zeros(1, 1))]
    result = evaluate(model, batches, F.mse_loss)
    assert isinstance(result, float), f'evaluate should return a Python float, got {type(result).__name__}'
    assert abs(result - 14 / 3) < 1e-06, f'per example: (1 + 4 + 9) / 3 = 14/3, got {result}'
    assert model.training, 'evaluate should leave the model in the mode it found it in'

@test_case(points=0, hidden=False)
def test_switches_format(SWITCHES, PARTS):
    keys = ['model.eval()', 'model.train()', 'torch.no_grad()', 'optimizer.zero_grad(set_to_none=True)', 'loss.backward()', 'optimizer.step()']
    assert isinstance(SWITCHES, dict) and sorted(SWITCHES) == sorted(keys), f'SWITCHES needs exactly the keys {keys}'
    for key, value in SWITCHES.items():
        assert isinstance(value, (set, frozenset)), f'SWITCHES[{key!r}] should be a set'
        assert value <= PARTS, f'SWITCHES[{key!r}] may only contain names from PARTS'

