from otter.test_files import test_case

OK_FORMAT = False

name = "q8b"
points = 4

@test_case(points=0, hidden=False)
def test_q8b_format(Q8_PADDING_DIRECTION, Q8_OOM_CAUSE, Q8_NO_SHIFT, Q8_CORRECT_LOSSES):
    for name, value in dict(Q8_PADDING_DIRECTION=Q8_PADDING_DIRECTION, Q8_OOM_CAUSE=Q8_OOM_CAUSE, Q8_NO_SHIFT=Q8_NO_SHIFT).items():
        assert isinstance(value, str) and value in ('a', 'b', 'c', 'd'), f'{name} should be one lowercase letter from "a" to "d", got {value!r}'
    assert isinstance(Q8_CORRECT_LOSSES, (set, frozenset)) and Q8_CORRECT_LOSSES <= {'a', 'b', 'c', 'd', 'e'}, f'Q8_CORRECT_LOSSES should be a set of letters from "a" to "e", e.g. {{"a", "e"}}; got {Q8_CORRECT_LOSSES!r}'

