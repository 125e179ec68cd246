# %% [markdown]
# ### q8 — Application questions (§2.5) (13 points)
#
# Answer each question by setting the named constant. Numeric answers are
# Python numbers (compute them in the cell if you like: the grader reads the
# value) and are accepted within 0.1% (relative) of the exact value, so 4
# significant figures suffice; multiple-choice answers are a lowercase letter as a string, `"a"`, or,
# where several options can be right, a set of letters, `{"a", "c"}`. The last
# two questions are written answers, graded by hand.

# %% [raw]
# # BEGIN QUESTION
# name: q8a
# points: 5

# %% [markdown]
# #### q8a — Numbers (§2.1–2.4) (5 points)
#
# 1. `Q8_UNMASKED_PPL`: a validation batch holds 60 real targets, on which the
#    model's perplexity is 20, and 40 padding targets, each predicted with
#    probability 0.98. What perplexity does the average over all 100 targets
#    report?
# 2. `Q8_N_TARGETS`: four sequences of 9, 4, 7 and 2 tokens are padded to
#    length 9 and shifted for next-token prediction. Over how many targets
#    does the correct loss average?
# 3. `Q8_ACCUMULATED_LOSS`: a batch is split into two microbatches. The first
#    holds 30 real targets with mean loss 2.0 nats, the second 10 real targets
#    with mean loss 3.2 nats. What is the batch's token-averaged loss, in nats?
# 4. `Q8_LOSS_NATS` and 5. `Q8_PPL_FROM_BITS`: a model's mean surprisal on a
#    test set is 3.5 bits per token. What is its mean cross-entropy loss in
#    nats, and what is its perplexity?

# %% [raw]
# # BEGIN SOLUTION

# %%
Q8_UNMASKED_PPL = math.exp((60 * math.log(20) + 40 * -math.log(0.98)) / 100)  # SOLUTION
Q8_N_TARGETS = (9 - 1) + (4 - 1) + (7 - 1) + (2 - 1)  # SOLUTION
Q8_ACCUMULATED_LOSS = (30 * 2.0 + 10 * 3.2) / (30 + 10)  # SOLUTION
Q8_LOSS_NATS = 3.5 * math.log(2)  # SOLUTION
Q8_PPL_FROM_BITS = 2 ** 3.5  # SOLUTION

# %% [raw]
# # END SOLUTION

# %% [raw]
# # BEGIN TESTS

# %%
""" # BEGIN TEST CONFIG
points: 0
""" # END TEST CONFIG
def test_q8a_numbers_are_numbers(Q8_UNMASKED_PPL, Q8_N_TARGETS, Q8_ACCUMULATED_LOSS, Q8_LOSS_NATS, Q8_PPL_FROM_BITS):
    import math
    answers = dict(Q8_UNMASKED_PPL=Q8_UNMASKED_PPL, Q8_N_TARGETS=Q8_N_TARGETS, Q8_ACCUMULATED_LOSS=Q8_ACCUMULATED_LOSS,
                   Q8_LOSS_NATS=Q8_LOSS_NATS, Q8_PPL_FROM_BITS=Q8_PPL_FROM_BITS)
    for name, value in answers.items():
        assert isinstance(value, (int, float)) and not isinstance(value, bool), \
            f"{name} should be a Python number, got {type(value).__name__}"
        assert math.isfinite(value), f"{name} should be finite"

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 1
""" # END TEST CONFIG
def test_q8_unmasked_ppl_hidden(Q8_UNMASKED_PPL):
    from hw07_checks import q8
    q8.check_unmasked_ppl(Q8_UNMASKED_PPL)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 1
""" # END TEST CONFIG
def test_q8_n_targets_hidden(Q8_N_TARGETS):
    from hw07_checks import q8
    q8.check_n_targets(Q8_N_TARGETS)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 1
""" # END TEST CONFIG
def test_q8_accumulated_loss_hidden(Q8_ACCUMULATED_LOSS):
    from hw07_checks import q8
    q8.check_accumulated_loss(Q8_ACCUMULATED_LOSS)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 1
""" # END TEST CONFIG
def test_q8_loss_nats_hidden(Q8_LOSS_NATS):
    from hw07_checks import q8
    q8.check_loss_nats(Q8_LOSS_NATS)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 1
""" # END TEST CONFIG
def test_q8_ppl_from_bits_hidden(Q8_PPL_FROM_BITS):
    from hw07_checks import q8
    q8.check_ppl_from_bits(Q8_PPL_FROM_BITS)

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [raw]
# # BEGIN QUESTION
# name: q8b
# points: 4

# %% [markdown]
# #### q8b — Multiple choice (§1.4, §2.2–2.3) (4 points)
#
# 1. `Q8_PADDING_DIRECTION` (one letter): on a batch where padding targets have
#    **higher** loss than real targets, the perplexity averaged over all
#    targets, padding included, is
#    (a) lower than the real-target perplexity;
#    (b) higher than the real-target perplexity;
#    (c) equal to it, because padding is a fixed token;
#    (d) higher or lower depending only on the batch size.
# 2. `Q8_OOM_CAUSE` (one letter): training with Adam, the forward and backward
#    passes of the first step succeed, and the out-of-memory error is raised
#    inside the first `optimizer.step()`. The likely cause is
#    (a) saved activations; (b) gradients; (c) optimizer state;
#    (d) the input batch.
# 3. `Q8_NO_SHIFT` (one letter): a causal model trained with `targets = inputs`
#    (no shift)
#    (a) learns next-token prediction, only more slowly;
#    (b) learns to copy its input: a very low training loss and a useless model;
#    (c) learns to predict the previous token;
#    (d) cannot lower its loss at all.
# 4. `Q8_CORRECT_LOSSES` (a set of letters): with `logits` of shape `(B, T, V)`,
#    aligned `targets` of shape `(B, T)` and padding id `PAD`, which expressions
#    give the mean loss over the real targets?
#    (a) `F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=PAD)`
#    (b) `F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=PAD, reduction="sum") / targets.numel()`
#    (c) `F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=PAD)`
#    (d) `F.cross_entropy(logits.softmax(-1).reshape(-1, V), targets.reshape(-1), ignore_index=PAD)`
#    (e) `F.cross_entropy(logits.transpose(0, 1).reshape(-1, V), targets.reshape(-1), ignore_index=PAD)`

# %% [raw]
# # BEGIN SOLUTION

# %%
Q8_PADDING_DIRECTION = "b"  # SOLUTION
Q8_OOM_CAUSE = "c"  # SOLUTION
Q8_NO_SHIFT = "b"  # SOLUTION
Q8_CORRECT_LOSSES = {"a", "c"}  # SOLUTION

# %% [raw]
# # END SOLUTION

# %% [raw]
# # BEGIN TESTS

# %%
""" # BEGIN TEST CONFIG
points: 0
""" # END TEST CONFIG
def test_q8b_format(Q8_PADDING_DIRECTION, Q8_OOM_CAUSE, Q8_NO_SHIFT, Q8_CORRECT_LOSSES):
    for name, value in dict(Q8_PADDING_DIRECTION=Q8_PADDING_DIRECTION, Q8_OOM_CAUSE=Q8_OOM_CAUSE,
                            Q8_NO_SHIFT=Q8_NO_SHIFT).items():
        assert isinstance(value, str) and value in ("a", "b", "c", "d"), \
            f'{name} should be one lowercase letter from "a" to "d", got {value!r}'
    assert isinstance(Q8_CORRECT_LOSSES, (set, frozenset)) and Q8_CORRECT_LOSSES <= {"a", "b", "c", "d", "e"}, \
        f'Q8_CORRECT_LOSSES should be a set of letters from "a" to "e", e.g. {{"a", "e"}}; got {Q8_CORRECT_LOSSES!r}'

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 1
""" # END TEST CONFIG
def test_q8_padding_direction_hidden(Q8_PADDING_DIRECTION):
    from hw07_checks import q8
    q8.check_padding_direction(Q8_PADDING_DIRECTION)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 1
""" # END TEST CONFIG
def test_q8_oom_cause_hidden(Q8_OOM_CAUSE):
    from hw07_checks import q8
    q8.check_oom_cause(Q8_OOM_CAUSE)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 1
""" # END TEST CONFIG
def test_q8_no_shift_hidden(Q8_NO_SHIFT):
    from hw07_checks import q8
    q8.check_no_shift(Q8_NO_SHIFT)

# %%
""" # BEGIN TEST CONFIG
hidden: true
points: 1
""" # END TEST CONFIG
def test_q8_correct_losses_hidden(Q8_CORRECT_LOSSES):
    from hw07_checks import q8
    q8.check_correct_losses(Q8_CORRECT_LOSSES)

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [raw]
# # BEGIN QUESTION
# name: q8c
# manual: true
# points: 2

# %% [markdown]
# #### q8c — What was n? (written, graded by hand) (2 points)
#
# After a change to the data loader, a teammate's validation perplexity drops
# from 18 to 11 overnight; the model and its weights did not change. In two to
# four sentences: name two checks you would make before believing the new
# number, and say what each would reveal.

# %% [raw]
# # BEGIN SOLUTION

# %% [markdown]
# _Sample answer._ Nothing about the model changed, so the new number most likely
# averages over a different set of targets. First, count the evaluated targets
# with the new loader and the old one (`(targets != pad_id).sum()` against
# `targets.numel()`): if the new loader pads more and the loss no longer excludes
# padding (`ignore_index` or a mask), easy padding targets are now in the average
# and flatter it. Second, check the shift: inputs `x[:, :-1]`, targets `x[:, 1:]`;
# if the new loader hands the model targets equal to its inputs, or misaligns them,
# the loss measures copying, not next-token prediction. Recomputing the masked
# perplexity on the same batches both ways settles it.

# %% [raw]
# # END SOLUTION

# %% [raw]
# # END QUESTION

# %% [raw]
# # BEGIN QUESTION
# name: q8d
# manual: true
# points: 2

# %% [markdown]
# #### q8d — Uneven microbatches (written, graded by hand) (2 points)
#
# A batch of padded sequences is split into K microbatches for gradient
# accumulation. A teammate divides each microbatch's **mean** loss by K before
# `backward`. In two to four sentences: when does this differ from the
# full-batch gradient, why, and what should each microbatch's summed loss be
# divided by instead?

# %% [raw]
# # BEGIN SOLUTION

# %% [markdown]
# _Sample answer._ The full-batch loss is the sum over all real targets divided by
# their total count N, so every real target has weight 1/N. Dividing microbatch k's
# mean by K gives each of its targets weight 1/(K n_k), which equals 1/N only when
# every microbatch holds the same number of real targets n_k = N/K; with uneven
# padding (or a smaller last microbatch) targets in sparse microbatches are
# over-weighted and the gradient is a different objective's. Divide each
# microbatch's summed loss over its real targets by N, the real-target count of the
# whole batch, counted before the loop.

# %% [raw]
# # END SOLUTION

# %% [raw]
# # END QUESTION
