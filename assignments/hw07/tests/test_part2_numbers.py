"""The handout's Part 2 numbers, reproduced by the *solution's* functions (q6, q7, q8).

The solution code cells of the master sources (the cells between the raw
`# BEGIN SOLUTION` / `# END SOLUTION` delimiters, after the intro's imports)
are executed as they are; the `# BEGIN PROMPT` strings in them are inert.
Then each number the handout prints is recomputed through those functions,
and the hidden checks are run against them (they must pass the solution).
"""
import math
import pathlib

import pytest
import torch
import torch.nn.functional as F

from coursekit.master import read_cells

NOTEBOOK = pathlib.Path(__file__).resolve().parents[1] / "notebook"


def solution_namespace(*sources: str) -> dict:
    """Globals after running the intro's import cell and the solution cells of `sources`."""
    ns: dict = {}
    intro = [c for c in read_cells(NOTEBOOK / "00_intro.py") if c.kind == "code"]
    for cell in intro:
        exec(compile(cell.source, "00_intro.py", "exec"), ns)
    for name in sources:
        inside = False
        for cell in read_cells(NOTEBOOK / name):
            text = cell.source.strip()
            if cell.kind == "raw" and text == "# BEGIN SOLUTION":
                inside = True
            elif cell.kind == "raw" and text == "# END SOLUTION":
                inside = False
            elif inside and cell.kind == "code":
                exec(compile(cell.source, cell.origin, "exec"), ns)
    return ns


@pytest.fixture(scope="module")
def q6():
    return solution_namespace("06_q6_lm_loss.py")


@pytest.fixture(scope="module")
def q7():
    return solution_namespace("07_q7_surprisal.py")


@pytest.fixture(scope="module")
def q8():
    return solution_namespace("08_q8_application.py")


def handout_padded_batch(n_real=23, n_pad=17, real_ppl=12.7, pad_p=0.999, V=16, pad_id=0):
    """§2.3's construction: real targets at perplexity real_ppl, padding predicted with probability pad_p."""
    n = n_real + n_pad
    flat_targets = torch.tensor([1] * n_real + [pad_id] * n_pad)
    correct_p = torch.tensor([1 / real_ppl] * n_real + [pad_p] * n_pad, dtype=torch.float64)
    probs = ((1 - correct_p) / (V - 1))[:, None].repeat(1, V)
    probs[torch.arange(n), flat_targets] = correct_p
    return probs.log(), flat_targets


def test_padding_example_12_7_and_4_31(q6):
    logits, targets = handout_padded_batch()
    assert int((targets != 0).sum()) == 23
    masked = q6["perplexity"](logits[None], targets[None], pad_id=0)
    unmasked = q6["perplexity"](logits[None], targets[None])
    assert abs(masked - 12.7) < 1e-10
    assert round(unmasked, 2) == 4.31 and 4.3 < unmasked < 4.4
    # the same batch as 4 sequences of 10, padding spread unevenly: n is still 23
    order = torch.randperm(40, generator=torch.Generator().manual_seed(0))
    batch_logits, batch_targets = logits[order].reshape(4, 10, -1), targets[order].reshape(4, 10)
    assert abs(q6["perplexity"](batch_logits, batch_targets, pad_id=0) - 12.7) < 1e-10
    # summed real-target loss / 23 is the masked mean
    loss = q6["lm_loss"](logits[None], targets[None], pad_id=0)
    total = F.cross_entropy(logits, targets, ignore_index=0, reduction="sum")
    assert torch.allclose(total / 23, loss)


def test_shift_yields_four_predictions_from_five_tokens(q6):
    inputs, targets = q6["shift_for_next_token"](torch.tensor([[5, 9, 2, 7, 4]]))
    assert inputs.tolist() == [[5, 9, 2, 7]] and targets.tolist() == [[9, 2, 7, 4]]


@pytest.mark.parametrize("pad_id", [None, 3])
def test_bits_meet_the_loss(q6, q7, pad_id):
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(3, 6, 8, generator=g, dtype=torch.float64) * 2
    targets = torch.randint(0, 3, (3, 6), generator=g)
    if pad_id is not None:
        targets[0, 4:] = pad_id
        targets[2, 1:] = pad_id
    bits = q7["surprisal_bits"](logits, targets, pad_id)
    loss = q6["lm_loss"](logits, targets, pad_id)
    assert torch.allclose(2 ** bits.mean(), torch.exp(loss))  # §2.4's assertion
    b, t, worst = q7["worst_token"](logits, targets, pad_id)
    assert worst == pytest.approx(bits.max().item())


def test_accumulation_equals_full_batch_in_float64(q6):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(7, 4), torch.nn.Linear(4, 7)).double()
    batch = torch.randint(0, 6, (5, 8), generator=torch.Generator().manual_seed(2))
    for row, length in enumerate([8, 2, 5, 3, 7]):
        batch[row, length:] = 6
    loss = q6["accumulate_lm_gradients"](model, batch, 2, 6)
    accumulated = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    full = F.cross_entropy(model(batch[:, :-1]).reshape(-1, 7), batch[:, 1:].reshape(-1), ignore_index=6)
    full.backward()
    assert loss == pytest.approx(full.item(), rel=1e-12)
    for a, p in zip(accumulated, model.parameters()):
        torch.testing.assert_close(a, p.grad, rtol=1e-12, atol=1e-14)


def test_q8_numbers_come_from_the_solution_functions(q6, q8):
    # 60 real targets at perplexity 20, 40 padding targets predicted with probability 0.98
    logits, targets = handout_padded_batch(n_real=60, n_pad=40, real_ppl=20.0, pad_p=0.98)
    assert q6["perplexity"](logits[None], targets[None], pad_id=0) == pytest.approx(20.0, rel=1e-12)
    assert q8["Q8_UNMASKED_PPL"] == pytest.approx(q6["perplexity"](logits[None], targets[None]), rel=1e-12)
    # the handout's own 12.7 -> 4.31 by the same formula
    assert 12.7 ** (23 / 40) * 0.999 ** (-17 / 40) == pytest.approx(4.3139, abs=1e-4)
    padded = torch.full((4, 9), 0)
    for row, length in enumerate([9, 4, 7, 2]):
        padded[row, :length] = 1
    _, shifted_targets = q6["shift_for_next_token"](padded)
    assert q8["Q8_N_TARGETS"] == int((shifted_targets != 0).sum()) == 18
    assert q8["Q8_ACCUMULATED_LOSS"] == pytest.approx(2.3)
    assert q8["Q8_PPL_FROM_BITS"] == pytest.approx(math.exp(q8["Q8_LOSS_NATS"]))


def test_hidden_checks_pass_the_solution(q6, q7, q8):
    from hw07_checks import q6 as c6, q7 as c7, q8 as c8

    c6.check_shift_for_next_token(q6["shift_for_next_token"])
    c6.check_lm_loss(q6["lm_loss"])
    c6.check_perplexity(q6["perplexity"])
    c6.check_accumulate_lm_gradients(q6["accumulate_lm_gradients"])
    c7.check_surprisal_bits(q7["surprisal_bits"])
    c7.check_worst_token(q7["worst_token"])
    c7.check_plot_surprisal(q7["plot_surprisal"])
    c8.check_unmasked_ppl(q8["Q8_UNMASKED_PPL"])
    c8.check_n_targets(q8["Q8_N_TARGETS"])
    c8.check_accumulated_loss(q8["Q8_ACCUMULATED_LOSS"])
    c8.check_loss_nats(q8["Q8_LOSS_NATS"])
    c8.check_ppl_from_bits(q8["Q8_PPL_FROM_BITS"])
    c8.check_padding_direction(q8["Q8_PADDING_DIRECTION"])
    c8.check_oom_cause(q8["Q8_OOM_CAUSE"])
    c8.check_no_shift(q8["Q8_NO_SHIFT"])
    c8.check_correct_losses(q8["Q8_CORRECT_LOSSES"])
