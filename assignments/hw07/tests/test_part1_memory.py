"""Part 1's memory questions (q1, q4, q5): the *solution's* functions and the hidden checks, in-process.

The solution is loaded from the master sources: each file's setup cells (the
code before its `# BEGIN QUESTION`) and the code cells between the raw
`# BEGIN SOLUTION` / `# END SOLUTION` delimiters, executed as they are (the
`# BEGIN PROMPT` strings in them are inert). Then:

- the behaviour the spec asks for is pinned directly (accumulation equals the
  full-batch gradient in float64 with an uneven last microbatch, adds to
  existing gradients, leaves the weights alone until the single step;
  `evaluate` leaves autograd's mode and the model's training flag as it found
  them; the memory figures match the probe's structural quantities);
- every hidden check passes the solution, and the memory checks fail the
  misconceptions that give the right numbers (M4, M18, M23, M17), while the
  numeric checks pass them: only memory tells them apart.

Memory figures are asserted exactly on the CPU tracker; where CUDA is
available, the checks run on the GPU through the same code (gpu_memory_check.py
prints the figures there).
"""
from __future__ import annotations

import copy

import matplotlib

matplotlib.use("Agg")  # tests only: the notebook itself never picks a backend

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from part1_solution import CHECKS, failed_checks  # noqa: E402  (first: it puts the checks on sys.path)
from hw07_checks import _probe, q1, q4, q5  # noqa: E402
from part1_solution import MEMORY_CHECKS, catalogue, defined_names, run_check, solution_namespace  # noqa: E402


@pytest.fixture(scope="module")
def sol():
    return solution_namespace()


CATALOGUE = catalogue()


# ----------------------------------------------------------------------------- the solution's behaviour


def _grads(model):
    return [p.grad.detach().clone() for p in model.parameters()]


def test_accumulation_equals_full_batch_in_float64_with_uneven_last_microbatch(sol):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 9), nn.Tanh(), nn.Linear(9, 4)).double()
    twin = copy.deepcopy(model)
    x, y = torch.randn(11, 5, dtype=torch.float64), torch.randint(0, 4, (11,))
    full = F.cross_entropy(twin(x), y)
    full.backward()
    loss = sol["accumulate_gradients"](model, x, y, 4)  # microbatches of 4, 4, 3
    assert isinstance(loss, float) and loss == pytest.approx(full.item(), rel=1e-12)
    for a, b in zip(_grads(model), _grads(twin)):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)


def test_accumulation_adds_to_existing_gradients_and_keeps_the_weights(sol):
    torch.manual_seed(1)
    model = nn.Linear(3, 2).double()
    x, y = torch.randn(7, 3, dtype=torch.float64), torch.tensor([0, 1, 1, 0, 1, 0, 0])
    for p in model.parameters():
        p.grad = torch.full_like(p, 0.25)
    existing, weights = _grads(model), [p.detach().clone() for p in model.parameters()]
    twin = copy.deepcopy(model)
    twin.zero_grad(set_to_none=True)
    F.cross_entropy(twin(x), y).backward()
    sol["accumulate_gradients"](model, x, y, 3)  # 3, 3, 1
    for p, w in zip(model.parameters(), weights):
        assert torch.equal(p.detach(), w), "accumulation must not change the weights"
    for p, e, t in zip(model.parameters(), existing, twin.parameters()):
        torch.testing.assert_close(p.grad, e + t.grad, rtol=1e-12, atol=1e-14)


def test_accumulated_train_step_clears_once_and_steps_once(sol):
    torch.manual_seed(2)
    model = nn.Linear(4, 3).double()
    x, y = torch.randn(10, 4, dtype=torch.float64), torch.randint(0, 3, (10,))
    F.cross_entropy(model(x[:2]), y[:2]).backward()  # stale gradients
    reference = copy.deepcopy(model)
    reference.zero_grad(set_to_none=True)
    F.cross_entropy(reference(x), y).backward()
    torch.optim.SGD(reference.parameters(), lr=0.5).step()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    steps, weights_at_step = [], []
    optimizer.register_step_pre_hook(
        lambda *_: weights_at_step.append([p.detach().clone() for p in model.parameters()]))
    optimizer.register_step_post_hook(lambda *_: steps.append(1))
    before = [p.detach().clone() for p in model.parameters()]
    sol["accumulated_train_step"](model, optimizer, x, y, 4)
    assert len(steps) == 1
    assert all(torch.equal(a, b) for a, b in zip(weights_at_step[0], before)), "weights changed before the step"
    for p, r in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p, r, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("outer_grad", [True, False])
def test_evaluate_restores_autograd_mode_and_training_flag(sol, training, outer_grad):
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.Linear(4, 1))
    model.train(training)
    batches = [(torch.randn(n, 3), torch.randn(n, 1)) for n in (4, 4, 1)]
    with torch.set_grad_enabled(outer_grad):
        value = sol["evaluate"](model, iter(batches), F.mse_loss)
        assert torch.is_grad_enabled() is outer_grad
    assert model.training is training
    assert all(m.training is training for m in model.modules())
    model.eval()
    with torch.no_grad():
        expected = sum(F.mse_loss(model(x), y, reduction="sum").item() for x, y in batches) / 9
    assert value == pytest.approx(expected, rel=1e-6)


def test_evaluate_leaves_gradients_exactly(sol):
    torch.manual_seed(4)
    model = nn.Linear(3, 1)
    F.mse_loss(model(torch.randn(5, 3)), torch.randn(5, 1)).backward()
    grads = [p.grad for p in model.parameters()]
    values = _grads(model)
    sol["evaluate"](model, [(torch.randn(2, 3), torch.randn(2, 1))], F.mse_loss)
    assert all(p.grad is g and torch.equal(g, v) for p, g, v in zip(model.parameters(), grads, values))


def test_adam_static_bytes_equals_what_adam_allocates(sol):
    """Parameters + gradients + Adam's moments measured after a real step = the formula (+ the `step` scalars)."""
    torch.manual_seed(5)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))
    model[0].requires_grad_(False)  # frozen: no gradient, no state
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3, foreach=False)
    with _probe.MemoryProbe(device="cpu", track=(model, optimizer)) as probe:
        F.cross_entropy(model(torch.randn(16, 32)), torch.randint(0, 8, (16,))).backward()
        optimizer.step()
        live = probe.live_bytes()
    trainable = sum(1 for p in model.parameters() if p.requires_grad)
    assert live == sol["adam_static_bytes"](model) + 4 * trainable  # one float32 `step` per trainable parameter


def test_saved_activation_bytes_matches_the_probe(sol):
    torch.manual_seed(6)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 16), nn.ReLU())
    x = torch.randn(8, 16)
    assert sol["saved_activation_bytes"](model, x) == _probe.saved_tensor_bytes(model, x)[1] == 4 * 8 * (16 + 64 + 16)


def test_memory_timeline_structure_on_the_cpu_tracker(sol):
    """Exact structural quantities: base = 4P, +8P (+ `step` scalars) at the first step, grads 4P until zero_grad."""
    model, batches = q4.timeline_setup(torch.device("cpu"), steps=3)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, foreach=False)
    with _probe.quiet():  # the probe collects garbage at each reading: cheap once the heap is frozen
        timeline = sol["memory_timeline"](model, optimizer, batches, F.cross_entropy)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    scalars = 4 * len(list(model.parameters()))
    v = dict(((i // 5, phase), b) for i, (phase, b) in enumerate(timeline))
    assert v[0, "start"] == params
    assert v[0, "step"] - v[0, "backward"] == 2 * params + scalars  # Adam's moments arrive at the first step
    for k in range(3):
        assert v[k, "step"] - v[k, "zero_grad"] == params  # gradients dropped by zero_grad(set_to_none=True)
        assert v[k, "forward"] > v[k, "start"] + params  # activations dominate this size
        if k:
            assert v[k, "start"] == params + 2 * params + scalars  # every later cycle starts higher
    fig = sol["plot_memory_timeline"](timeline)
    tallest = max(sum(h for _, h in stack) for stack in q4._stacks(fig).values())
    assert fig.axes and tallest == pytest.approx(max(b for _, b in timeline) / 2 ** 20)
    import matplotlib.pyplot as plt
    plt.close(fig)


# ----------------------------------------------------------------------------- the hidden checks


@pytest.mark.parametrize("name", list(CHECKS))
def test_solution_passes_every_hidden_check(sol, name):
    for check in CHECKS[name]:
        assert run_check(check, sol[name]) is None, f"{check.__name__} fails the solution"


def test_untouched_stubs_fail_every_hidden_check():
    def stub(*args, **kwargs):
        raise NotImplementedError("stub")

    prompts = {"SWITCHES": {k: set() for k in q1.EXPECTED_SWITCHES},
               "OOM_CAUSE": {k: ... for k in q4.EXPECTED_OOM_CAUSE}}
    for name, checks in CHECKS.items():
        for check in checks:
            message = run_check(check, prompts.get(name, stub))
            assert message, f"{check.__name__} passes the untouched stub of {name}"


MEMORY_ONLY = ["M4", "M4-kept-losses", "M18", "M18-list", "M23", "M23-plain", "M17", "M46-identity-pack-leak"]


@pytest.mark.parametrize("variant_id", MEMORY_ONLY)
def test_memory_checks_catch_what_the_numbers_cannot(variant_id):
    """These variants compute the right numbers: the numeric checks pass them, a memory check fails them."""
    variant = CATALOGUE[variant_id]
    failed = failed_checks(variant)
    assert failed, f"{variant_id} ({variant.note}) passes every check"
    assert all(check in MEMORY_CHECKS for check, _ in failed), f"{variant_id} fails a numeric check: {failed}"
    text = " ".join(m for _, m in failed).lower()
    assert all(f.lower() in text for f in variant.expect), f"message does not name the mistake: {text}"


@pytest.mark.parametrize("variant_id", ["inference_mode", "tensor-sum-no_grad", "mean-times-fraction",
                                        "checkpoint_sequential", "timeline-default-device",
                                        "saved-param-ptrs"])
def test_memory_checks_accept_correct_alternatives(variant_id):
    variant = CATALOGUE[variant_id]
    assert variant.correct
    ns = solution_namespace(variant.source)
    for name in defined_names(variant.source):
        for check in CHECKS[name]:
            assert run_check(check, ns[name]) is None, f"{check.__name__} fails the correct alternative {variant_id}"


def test_cpu_memory_figures_separate_reference_and_misconceptions():
    """The margins the checks use, with the figures measured on the CPU tracker."""
    if _probe.device().type != "cpu":
        pytest.skip("exact CPU figures")
    ns = {v: solution_namespace(CATALOGUE[v].source) for v in ("M4", "M18", "M23")}
    m4 = q1.measure_evaluate_memory(ns["M4"]["evaluate"])
    assert m4["yours"]["peak"] - m4["reference"]["peak"] > m4["saved_one_batch"] / 2
    m18 = q5.measure_accumulation_memory(ns["M18"]["accumulate_gradients"])
    assert m18["reference"]["slope"] == 0
    # each extra microbatch keeps its model activations (the loss's own saved tensors are smaller)
    assert 0.8 * m18["saved_one_microbatch"] < m18["yours"]["slope"] <= m18["saved_one_microbatch"]
    m23 = q5.measure_checkpoint_memory(ns["M23"]["checkpointed_forward"])
    assert m23["yours"] == m23["plain"] and m23["plain"] >= 4 * m23["reference"]
