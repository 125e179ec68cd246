"""q8 variants: wrong answers a student who half-read §2 would give, and accepted alternative forms."""
from coursekit.harness import Variant

VARIANTS = [
    Variant("M62-real-ppl", "q8a", note="answers the real-target perplexity, not the unmasked one",
            expect=("real-target perplexity",), source='''
Q8_UNMASKED_PPL = 20.0
'''),
    Variant("M65-tokens", "q8a", note="counts tokens, forgetting the shift", expect=("not targets",),
            source='''
Q8_N_TARGETS = 9 + 4 + 7 + 2
'''),
    Variant("M30-mean-of-means", "q8a", note="mean of microbatch means", expect=("mean of the microbatch means",),
            source='''
Q8_ACCUMULATED_LOSS = (2.0 + 3.2) / 2
'''),
    Variant("M66-exp-of-bits", "q8a", note="perplexity as exp of bits", expect=("exponentiated base 2",), source='''
Q8_PPL_FROM_BITS = math.exp(3.5)
'''),
    Variant("M67-padding-lowers", "q8b", note="padding always lowers perplexity", expect=("rises",), source='''
Q8_PADDING_DIRECTION = "a"
'''),
    Variant("M51-oom-activations", "q8b", note="blames activations for an OOM at the first step",
            expect=("first step",), source='''
Q8_OOM_CAUSE = "a"
'''),
    Variant("M27-positions", "q8b", note="accepts dividing by every position",
            expect=("what n was",), source='''
Q8_CORRECT_LOSSES = {"a", "b", "c"}
'''),
    # accepted alternative forms keep full marks
    Variant("q8-plain-numbers", "q8a", correct=True, note="rounded numbers typed in", source='''
Q8_UNMASKED_PPL = 6.0831
Q8_N_TARGETS = 18
Q8_ACCUMULATED_LOSS = 2.3
Q8_LOSS_NATS = 2.426
Q8_PPL_FROM_BITS = 11.314
'''),
    Variant("q8-letter-forms", "q8b", correct=True, note="upper case, frozenset", source='''
Q8_PADDING_DIRECTION = "B"
Q8_CORRECT_LOSSES = frozenset({"c", "a"})
'''),
]

# issue 10: one stated tolerance (0.1%): 4 significant figures pass, fewer are "close but outside"
VARIANTS += [
    Variant("sig-figs-4", "q8a", correct=True, note="every number to 4 significant figures", source='''
Q8_UNMASKED_PPL = 6.083
Q8_N_TARGETS = 18
Q8_ACCUMULATED_LOSS = 2.300
Q8_LOSS_NATS = 2.426
Q8_PPL_FROM_BITS = 11.31
'''),
    Variant("sig-figs-mixed", "q8a", correct=True, note="integer-valued float, 5 figures, expressions", source='''
Q8_UNMASKED_PPL = 6.0831
Q8_N_TARGETS = 18.0
Q8_ACCUMULATED_LOSS = 92 / 40
Q8_LOSS_NATS = 2.4260
Q8_PPL_FROM_BITS = 8 * 2 ** 0.5
'''),
    Variant("M69-two-figures", "q8a", note="2 significant figures", expect=("outside the tolerance",), source='''
Q8_PPL_FROM_BITS = 11.0
'''),
    Variant("M69-rounded-loss", "q8a", note="loss in nats rounded to 2.4", expect=("outside the tolerance",), source='''
Q8_LOSS_NATS = 2.4
'''),
]
