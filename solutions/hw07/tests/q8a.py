from otter.test_files import test_case

OK_FORMAT = False

name = "q8a"
points = 5

@test_case(points=0, hidden=False)
def test_q8a_numbers_are_numbers(Q8_UNMASKED_PPL, Q8_N_TARGETS, Q8_ACCUMULATED_LOSS, Q8_LOSS_NATS, Q8_PPL_FROM_BITS):
    import math
    answers = dict(Q8_UNMASKED_PPL=Q8_UNMASKED_PPL, Q8_N_TARGETS=Q8_N_TARGETS, Q8_ACCUMULATED_LOSS=Q8_ACCUMULATED_LOSS, Q8_LOSS_NATS=Q8_LOSS_NATS, Q8_PPL_FROM_BITS=Q8_PPL_FROM_BITS)
    for name, value in answers.items():
        assert isinstance(value, (int, float)) and (not isinstance(value, bool)), f'{name} should be a Python number, got {type(value).__name__}'
        assert math.isfinite(value), f'{name} should be finite'

