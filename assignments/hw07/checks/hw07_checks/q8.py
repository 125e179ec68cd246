"""q8 — Application questions (handout §2.5).

Each expected number is computed here from the question's scenario; each
multiple-choice answer is compared after normalizing case and whitespace.
Common wrong answers get a message that names the slip.
"""
from __future__ import annotations

import math
import numbers

from ._common import close_float, expect, fail

# q8a scenarios (the numbers in the question text)
REAL, PAD, REAL_PPL, PAD_P = 60, 40, 20.0, 0.98
LENGTHS, PADDED_TO = (9, 4, 7, 2), 9
MICRO = ((30, 2.0), (10, 3.2))   # (real targets, mean loss in nats) per microbatch
BITS = 3.5
# One tolerance for every numeric answer, stated in the prompt: within 0.1% (4 significant figures suffice).
TOLERANCE = 1e-3
NEARLY = 3e-2  # inside this but outside TOLERANCE: "close, but not precise enough"


def _number(value, name: str) -> float:
    expect(value is not ..., f"{name} is still ...: set it to your answer.")
    expect(isinstance(value, numbers.Real) and not isinstance(value, bool),
           f"{name} should be a Python number, got {type(value).__name__}.")
    expect(math.isfinite(float(value)), f"{name} should be finite, got {value!r}.")
    return float(value)


def _answer_with(value: float, name: str, expected: float, wrong: list[tuple[float, str, str]]) -> None:
    if close_float(value, expected, rel=TOLERANCE, abs_tol=1e-9):
        return
    for w, message, mid in wrong:
        if close_float(value, w, rel=TOLERANCE, abs_tol=1e-9):
            fail(f"{name} = {value:g}: {message}", mid)
    if close_float(value, expected, rel=NEARLY):
        fail(f"{name} = {value:g} is close to the answer but outside the tolerance: answers must be within 0.1% "
             "(relative). Keep more digits (4 significant figures suffice), or write the expression itself, "
             "e.g. math.exp(...).", "M69")
    fail(f"{name} = {value:g} is not the answer to the scenario in the question.")


def check_unmasked_ppl(Q8_UNMASKED_PPL) -> None:
    value = _number(Q8_UNMASKED_PPL, "Q8_UNMASKED_PPL")
    n = REAL + PAD
    loss = (REAL * math.log(REAL_PPL) + PAD * -math.log(PAD_P)) / n
    _answer_with(value, "Q8_UNMASKED_PPL", math.exp(loss), [
        (REAL_PPL, "that is the real-target perplexity; the question asks what the average over all 100 targets, "
                   "padding included, reports.", "M62"),
        (REAL / n * REAL_PPL + PAD / n / PAD_P, "you averaged the perplexities. Perplexity is exp of the mean loss: "
                                                "average the losses (in nats), then exponentiate.", "M63"),
        (2 ** loss, "the losses are in nats (natural log), so exponentiate with exp, not 2 **.", "M58"),
        (loss, "that is the mean loss in nats; perplexity is its exp.", "M64"),
    ])


def check_n_targets(Q8_N_TARGETS) -> None:
    value = _number(Q8_N_TARGETS, "Q8_N_TARGETS")
    expected = sum(L - 1 for L in LENGTHS)
    _answer_with(value, "Q8_N_TARGETS", expected, [
        (sum(LENGTHS), "you counted tokens, not targets. After the shift a sequence of L tokens yields L - 1 "
                       "predictions: nothing predicts the first token.", "M65"),
        (len(LENGTHS) * (PADDED_TO - 1), "that counts every position of the padded batch, padding included; only "
                                         "real targets count.", "M27"),
        (len(LENGTHS) * PADDED_TO, "that counts every position of the padded batch, padding included and without "
                                   "the shift; only real targets count.", "M27"),
        (len(LENGTHS), "that is the number of sequences; the loss averages over targets.", "M27"),
    ])


def check_accumulated_loss(Q8_ACCUMULATED_LOSS) -> None:
    value = _number(Q8_ACCUMULATED_LOSS, "Q8_ACCUMULATED_LOSS")
    expected = sum(n * m for n, m in MICRO) / sum(n for n, _ in MICRO)
    _answer_with(value, "Q8_ACCUMULATED_LOSS", expected, [
        (sum(m for _, m in MICRO) / len(MICRO), "that is the mean of the microbatch means, which weights the 10 "
                                                "targets of the second microbatch like the 30 of the first. Add the "
                                                "summed losses and divide by all real targets.", "M30"),
        (sum(m for _, m in MICRO), "that adds the microbatch means; the token average divides the summed loss by all "
                                   "real targets.", "M20"),
    ])


def check_loss_nats(Q8_LOSS_NATS) -> None:
    value = _number(Q8_LOSS_NATS, "Q8_LOSS_NATS")
    _answer_with(value, "Q8_LOSS_NATS", BITS * math.log(2), [
        (BITS, "that is the loss in bits; the question asks for nats (natural log).", "M31"),
        (BITS / math.log(2), "the conversion goes the other way: H_nats = H_bits * ln 2, since log2 p = ln p / ln 2.", "M31"),
        (2 ** BITS, "that is the perplexity; the question asks for the loss in nats.", "M64"),
    ])


def check_ppl_from_bits(Q8_PPL_FROM_BITS) -> None:
    value = _number(Q8_PPL_FROM_BITS, "Q8_PPL_FROM_BITS")
    _answer_with(value, "Q8_PPL_FROM_BITS", 2 ** BITS, [
        (math.exp(BITS), "a mean surprisal in bits is exponentiated base 2; exp is for a loss in nats.", "M66"),
        (BITS, "that is the mean surprisal; perplexity is 2 ** (mean bits).", "M64"),
    ])


def _letter(value, name: str, options: str) -> str:
    expect(value is not ..., f"{name} is still ...: set it to one letter.")
    expect(isinstance(value, str), f"{name} should be one letter as a string, e.g. \"a\"; got {type(value).__name__}.")
    letter = value.strip().lower().strip("()")
    expect(len(letter) == 1 and letter in options,
           f"{name} should be one letter from {', '.join(options)}; got {value!r}.")
    return letter


def check_padding_direction(Q8_PADDING_DIRECTION) -> None:
    letter = _letter(Q8_PADDING_DIRECTION, "Q8_PADDING_DIRECTION", "abcd")
    expect(letter == "b", "Q8_PADDING_DIRECTION: not that one. The unmasked loss averages in targets whose loss is "
           "higher than the real targets' mean, so the average loss rises, and perplexity, exp of it, rises with it. "
           "Padding's effect depends on its loss versus the real targets', not on the batch size.", "M67")


def check_oom_cause(Q8_OOM_CAUSE) -> None:
    letter = _letter(Q8_OOM_CAUSE, "Q8_OOM_CAUSE", "abcd")
    expect(letter == "c", "Q8_OOM_CAUSE: not that one. Forward and backward already succeeded, so saved activations "
           "and gradients fit. Adam allocates its two moment buffers (2P numbers) lazily, at the first step.", "M51")


def check_no_shift(Q8_NO_SHIFT) -> None:
    letter = _letter(Q8_NO_SHIFT, "Q8_NO_SHIFT", "abcd")
    expect(letter == "b", "Q8_NO_SHIFT: not that one. Without the shift, the target at position t is the input at "
           "position t, which the model can see: it learns to copy its input.", "M24")


def check_correct_losses(Q8_CORRECT_LOSSES) -> None:
    value = Q8_CORRECT_LOSSES
    expect(value is not ..., "Q8_CORRECT_LOSSES is still ...: set it to a set of letters.")
    if isinstance(value, str):
        fail("Q8_CORRECT_LOSSES should be a set of letters, e.g. {\"a\", \"e\"}, not a string.")
    expect(isinstance(value, (set, frozenset, list, tuple)) and all(isinstance(v, str) for v in value),
           f"Q8_CORRECT_LOSSES should be a set of letters, got {type(value).__name__}.")
    letters = {v.strip().lower() for v in value}
    expect(letters <= set("abcde"), f"Q8_CORRECT_LOSSES: options are a to e; got {sorted(letters)}.")
    reasons = {
        "b": "(b) divides the real targets' summed loss by every position, padding included: ask what n was.",
        "d": "(d) applies softmax before cross_entropy, which expects raw scores (logits).",
        "e": "(e) transposes batch and time before the reshape, pairing logits with other positions' targets.",
    }
    wrong = sorted(letters - {"a", "c"})
    ids = {"b": "M27", "d": "M28", "e": "M29"}
    if wrong:
        fail("Q8_CORRECT_LOSSES includes a wrong expression: " + " ".join(reasons[w] for w in wrong),
             *(ids[w] for w in wrong))
    missing = sorted({"a", "c"} - letters)
    if missing:
        fail(f"Q8_CORRECT_LOSSES misses {len(missing)} correct expression{'s' if len(missing) > 1 else ''}. "
             "cross_entropy accepts flattened (N, V) scores, and also (B, V, T) scores with (B, T) targets "
             "(classes on axis 1).", "M68")
