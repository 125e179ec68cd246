"""The plain-data channel (coursekit/wire.py): round trips, and hostile input as the examiner meets it."""
from __future__ import annotations

import base64
import math

import numpy as np
import pytest
import torch

from coursekit import figure_data, wire


@pytest.mark.parametrize("value", [
    None, True, 3, -2.5, "text", [1, "a"], (1, (2, 3)), {"a": 1}, {1: "one", (2, 3): "pair"},
    {"x", "y"}, frozenset({1}), torch.Size([2, 3]), 1 << 80,
])
def test_plain_values_round_trip(value):
    assert wire.decode(wire.encode(value)) == value


def test_tensors_round_trip_with_dtype_and_shape():
    for t in (torch.randn(3, 4, dtype=torch.float64), torch.arange(6).reshape(2, 3), torch.zeros(0, 5),
              torch.tensor(True), torch.randn(2, dtype=torch.bfloat16), torch.randn(4, 4).t()):
        back = wire.decode(wire.encode(t))
        assert type(back) is torch.Tensor and back.dtype == t.dtype and back.shape == t.shape
        assert torch.equal(back, t)


def test_special_floats_and_numpy():
    out = wire.decode(wire.encode([math.inf, -math.inf, np.float32(1.5), np.arange(3)]))
    assert out[0] == math.inf and out[1] == -math.inf and math.isnan(wire.decode(wire.encode(math.nan)))
    assert isinstance(out[2], np.float32) and out[2] == 1.5 and np.array_equal(out[3], np.arange(3))


def test_unknown_objects_arrive_as_named_empty_instances():
    class Proxy:
        pass

    back = wire.decode(wire.encode(Proxy()))
    assert type(back).__name__ == "Proxy" and not isinstance(back, (int, float, torch.Tensor))


def _tensor(dtype="float32", shape=(2,), data=None):
    raw = data if data is not None else base64.b64encode(b"\0" * 8).decode()
    return {"$tensor": {"dtype": dtype, "shape": list(shape), "data": raw}}


@pytest.mark.parametrize("hostile", [
    _tensor(shape=(3,)),                                   # bytes do not match the shape
    _tensor(dtype="object"),                               # not a tensor dtype
    _tensor(shape=(1 << 40, 1 << 40)),                     # absurd shape
    _tensor(data="!!!not base64!!!"),
    {"$tensor": "x"}, {"$tuple": 5}, {"$set": [[1]]}, {"$dict": [[1]]}, {"$float": "1e999"},
    {"$int": "9" * 5000}, {"$size": ["a"]}, {"$module": {}}, {"$fn": "os:system"}, {"$evil": 1},
    {"$numpy": {"dtype": "float64", "shape": [2], "data": ""}},
])
def test_hostile_values_are_wire_errors(hostile):
    with pytest.raises(wire.WireError):
        wire.decode(hostile)


def test_depth_and_count_limits():
    deep = current = []
    for _ in range(wire.MAX_DEPTH + 5):
        current.append([])
        current = current[0]
    with pytest.raises(wire.WireError):
        wire.decode(deep)
    with pytest.raises(wire.WireError):
        wire.decode([0] * (wire.MAX_ITEMS + 1))


def test_figures_rebuild_what_checks_read():
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.add_subplot()
    ax.bar([0, 1, 2], [3.0, 1.0, 2.0], color="tab:red", label="bits")
    ax.set_xlabel("token")
    ax.set_ylabel("surprisal (bits)")
    ax.set_xticks([0, 1, 2], ["a", "b", "c"])
    ax.legend()
    back = figure_data.rebuild(figure_data.extract(fig))
    bx = back.axes[0]
    assert [p.get_height() for p in bx.patches] == [3.0, 1.0, 2.0]
    assert [p.get_x() + p.get_width() / 2 for p in bx.patches] == pytest.approx([0, 1, 2])
    assert bx.get_ylabel() == "surprisal (bits)" and [t.get_text() for t in bx.get_xticklabels()] == ["a", "b", "c"]
    assert [t.get_text() for t in bx.get_legend().get_texts()] == ["bits"]


def test_hostile_figure_data_is_refused():
    with pytest.raises(figure_data.FigureDataError):
        figure_data.rebuild({"axes": [{"patches": [{"xy": "x"}]}]})
    with pytest.raises(figure_data.FigureDataError):
        figure_data.rebuild({"axes": [{}] * 100})
