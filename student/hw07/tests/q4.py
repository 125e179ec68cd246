from otter.test_files import test_case

OK_FORMAT = False

name = "q4"
points = 10

@test_case(points=0, hidden=False)
def test_adam_static_bytes_16p(adam_static_bytes):
    import torch
    model = torch.nn.Linear(10, 5)
    assert adam_static_bytes(model) == 16 * 55, 'float32 Adam: 16 bytes per parameter'

@test_case(points=0, hidden=False)
def test_saved_activation_bytes_example(saved_activation_bytes):
    import torch
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
    got = saved_activation_bytes(model, torch.randn(3, 4))
    assert isinstance(got, int), f'return an int, got {type(got).__name__}'
    assert got == 144, f'expected 144 bytes (the weight is in memory anyway: leave it out), got {got}'

@test_case(points=0, hidden=False)
def test_memory_timeline_format(memory_timeline):
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    batches = [(torch.randn(2, 4), torch.tensor([0, 2]))]
    timeline = memory_timeline(model, torch.optim.Adam(model.parameters()), batches, F.cross_entropy)
    assert [phase for phase, _ in timeline] == ['start', 'forward', 'backward', 'step', 'zero_grad']
    assert all((isinstance(b, int) for _, b in timeline)), 'live memory in bytes, as ints'

@test_case(points=0, hidden=False)
def test_oom_cause_format(OOM_CAUSE, OOM_CAUSES):
    keys = {'at the first optimizer step', 'late in the forward pass', 'in backward'}
    assert isinstance(OOM_CAUSE, dict) and set(OOM_CAUSE) == keys, f'OOM_CAUSE needs exactly the keys {keys}'
    assert all((v in OOM_CAUSES for v in OOM_CAUSE.values())), 'each cause is one of OOM_CAUSES'

