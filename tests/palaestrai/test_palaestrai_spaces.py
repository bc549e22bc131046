"""palaestrAI's spaces as one behavior's observation vector and actions (ml_arl.palaestrai.spaces):
ObservationLayout's encode/decode and ActionLayout's values/encode against hand values for
palaestrai.types Box (finite and infinite bounds), Discrete (with start), MultiBinary,
MultiDiscrete and Tuple, and round trips over sampled values (hypothesis)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium import spaces as gym_spaces
from hypothesis import given, settings
from hypothesis import strategies as st
from palaestrai.types import Box, Discrete, MultiBinary, MultiDiscrete, Tuple

from ml_arl.palaestrai.spaces import ActionLayout, ObservationLayout, SpaceError

INF = np.inf


def same(a: Any, b: Any) -> bool:
    """Equal values: arrays element for element (and shape), tuples part for part."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and all(map(same, a, b))
    return np.shape(a) == np.shape(b) and bool(np.array_equal(np.asarray(a), np.asarray(b)))


# -- observations ---------------------------------------------------------------------------

OBS_SPACES = [
    Box(-1.0, 1.0, shape=(2,)),
    Box(-INF, INF, shape=(2, 2)),
    Discrete(3, start=-1),
    MultiBinary(3),
    MultiDiscrete([2, 3]),
    Tuple((Discrete(2), Box(0.0, 1.0, shape=(1,)))),
]
OBS_VALUES = [
    np.array([0.5, -0.25]),
    np.array([[1.0e6, -3.0], [0.0, 2.5]]),
    1,
    np.array([1, 0, 1], np.int8),
    np.array([1, 2]),
    (1, np.array([0.5])),
]
OBS_ROW = [
    0.5, -0.25,  # Box: flattened
    1.0e6, -3.0, 0.0, 2.5,  # infinite Box: flattened as is, no scaling
    0.0, 0.0, 1.0,  # Discrete(3, start=-1): 1 is the third value
    1.0, 0.0, 1.0,  # MultiBinary: 0/1
    0.0, 1.0, 0.0, 0.0, 1.0,  # MultiDiscrete [2, 3]: a one-hot per entry
    0.0, 1.0, 0.5,  # Tuple: its parts in order
]


def test_observation_layout_encodes_each_space_in_the_listed_order() -> None:
    layout = ObservationLayout([f"env.{i}" for i in range(len(OBS_SPACES))], OBS_SPACES)
    assert layout.widths == [2, 4, 3, 3, 5, 3] and layout.size == 20
    row = layout.encode(OBS_VALUES)
    assert row.dtype == np.float32 and row.shape == (20,)
    assert row.tolist() == OBS_ROW


def test_observation_layout_decodes_its_encoding() -> None:
    layout = ObservationLayout([f"env.{i}" for i in range(len(OBS_SPACES))], OBS_SPACES)
    decoded = layout.decode(np.array(OBS_ROW, np.float32))
    for space, want, got in zip(OBS_SPACES, OBS_VALUES, decoded):
        assert same(got, want), (space, got, want)
        assert space.contains(got), (space, got)
    assert decoded[2] == 1 and isinstance(decoded[2], int)
    assert decoded[1].shape == (2, 2) and decoded[1].dtype == np.float64


def test_discrete_with_start_encodes_each_value_at_its_own_place() -> None:
    layout = ObservationLayout(["env.d"], [Discrete(4, start=10)])
    for value in range(10, 14):
        row = layout.encode([value])
        assert row.tolist() == [1.0 if i == value - 10 else 0.0 for i in range(4)]
        assert layout.decode(row) == [value]


def test_scalar_box_is_one_value() -> None:
    """palaestrai_environments' random environments use Box(..., shape=())."""
    layout = ObservationLayout(["env.s"], [Box(0.0, 10.0, shape=())])
    assert layout.size == 1
    row = layout.encode([np.array(7.5)])
    assert row.tolist() == [7.5]
    (value,) = layout.decode(row)
    assert value.shape == () and float(value) == 7.5


@pytest.mark.parametrize(
    "space,value,needle",
    [
        (Discrete(3, start=-1), 2, "env.bad"),  # above the last value
        (Discrete(3, start=-1), -2, "outside"),  # below start
        (MultiDiscrete([2, 3]), np.array([0, 3]), "outside"),
        (Box(-1.0, 1.0, shape=(2,)), np.array([0.0, 0.0, 0.0]), "3 values"),
    ],
)
def test_a_value_that_does_not_fit_its_space_is_a_space_error_naming_the_sensor(space: Any, value: Any, needle: str) -> None:
    layout = ObservationLayout(["env.bad"], [space])
    with pytest.raises(SpaceError) as err:
        layout.encode([value])
    assert needle in str(err.value) and "env.bad" in str(err.value) and "\n" not in str(err.value)


def test_an_unsupported_space_is_a_space_error_naming_the_supported_ones() -> None:
    with pytest.raises(SpaceError, match="Box, Discrete, MultiBinary, MultiDiscrete, Tuple"):
        ObservationLayout(["env.t"], [gym_spaces.Text(5)])
    with pytest.raises(SpaceError, match="actuator env.t"):
        ActionLayout(["env.t"], [gym_spaces.Text(5)])


def _value_of(draw: Any, space: Any) -> Any:
    seed = draw(st.integers(0, 2**31 - 1))
    space.seed(seed)
    return space.sample()


OBS_SAMPLED = [
    Box(-1.0, 1.0, shape=(3,), dtype=np.float32),
    Box(-INF, INF, shape=(2,), dtype=np.float32),
    Box(0.0, INF, shape=(1, 2), dtype=np.float32),
    Discrete(5, start=-2),
    MultiBinary(4),
    MultiDiscrete([3, 1, 4]),
    Tuple((Discrete(3, start=1), MultiBinary(2), Box(-5.0, 5.0, shape=(2,), dtype=np.float32))),
]


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.data())
def test_observation_round_trip_over_sampled_values(data: st.DataObject) -> None:
    chosen = data.draw(st.lists(st.sampled_from(range(len(OBS_SAMPLED))), min_size=1, max_size=5))
    space_list = [OBS_SAMPLED[i] for i in chosen]
    values = [_value_of(data.draw, space) for space in space_list]
    layout = ObservationLayout([f"env.{i}" for i in range(len(space_list))], space_list)
    row = layout.encode(values)
    assert row.shape == (layout.size,) and np.all(np.isfinite(row))
    for space, want, got in zip(space_list, values, layout.decode(row)):
        assert same(got, want), (space, got, want)


# -- actions --------------------------------------------------------------------------------

ACT_SPACES = [
    Box(-2.0, 2.0, shape=(2,)),
    Box(-INF, INF, shape=(1,)),
    Discrete(3, start=1),
    MultiDiscrete([2, 3]),
    MultiBinary(2),
    Tuple((Box(0.0, 10.0, shape=(1,)), Discrete(4))),
]
CONTINUOUS = np.array([-1.0, 0.5, 0.25, 1.0], np.float32)  # Box(2), infinite Box(1), the Tuple's Box(1)
DISCRETE = np.array([2, 1, 2, 0, 1, 3], np.int32)  # Discrete, MultiDiscrete x2, MultiBinary x2, the Tuple's Discrete
ACT_VALUES = [
    np.array([-2.0, 1.0]),  # [-1, 1] onto [-2, 2]
    np.array([0.25]),  # infinite bounds: as it is
    3,  # branch 2 of Discrete(3, start=1)
    np.array([1, 2]),
    np.array([0, 1], np.int8),
    (np.array([10.0]), 3),
]


def test_action_layout_splits_actuators_into_continuous_actions_and_branches() -> None:
    layout = ActionLayout([f"env.{i}" for i in range(len(ACT_SPACES))], ACT_SPACES)
    assert layout.continuous == 4
    assert layout.branches == [3, 2, 3, 2, 2, 4]


def test_action_values_against_hand_values() -> None:
    layout = ActionLayout([f"env.{i}" for i in range(len(ACT_SPACES))], ACT_SPACES)
    values = layout.values(CONTINUOUS, DISCRETE)
    for space, want, got in zip(ACT_SPACES, ACT_VALUES, values):
        assert same(got, want), (space, got, want)
        assert space.contains(got), (space, got)
    assert values[0].dtype == np.float64 and values[3].dtype == np.int64 and values[4].dtype == np.int8


def test_action_encode_is_the_inverse_of_values() -> None:
    layout = ActionLayout([f"env.{i}" for i in range(len(ACT_SPACES))], ACT_SPACES)
    cont, disc = layout.encode(ACT_VALUES)
    assert cont.dtype == np.float32 and disc.dtype == np.int32
    assert cont.tolist() == CONTINUOUS.tolist()
    assert disc.tolist() == DISCRETE.tolist()


def test_continuous_actions_are_clipped_to_minus_one_one_before_scaling() -> None:
    layout = ActionLayout(["env.a", "env.b"], [Box(0.0, 4.0, shape=(2,)), Box(-INF, INF, shape=(2,))])
    finite, infinite = layout.values(np.array([3.0, -7.0, 2.5, -1.5], np.float32), np.zeros(0, np.int32))
    assert finite.tolist() == [4.0, 0.0]
    assert infinite.tolist() == [1.0, -1.0]


def test_a_box_with_equal_bounds_encodes_without_dividing_by_zero() -> None:
    layout = ActionLayout(["env.c"], [Box(np.array([1.0, 0.0]), np.array([1.0, 2.0]))])
    cont, _ = layout.encode([np.array([1.0, 1.5])])
    assert np.all(np.isfinite(cont)) and cont[1] == pytest.approx(0.5)
    (value,) = layout.values(cont, np.zeros(0, np.int32))
    assert value.tolist() == [1.0, 1.5]


def test_a_half_bounded_box_action_stays_inside_its_space() -> None:
    space = Box(0.0, INF, shape=(1,))
    (value,) = ActionLayout(["env.h"], [space]).values(np.array([-0.5], np.float32), np.zeros(0, np.int32))
    assert space.contains(value), value


ACT_SAMPLED = [
    Box(-3.0, 5.0, shape=(2,), dtype=np.float32),
    Box(-INF, INF, shape=(1,), dtype=np.float32),
    Discrete(4, start=-1),
    MultiDiscrete([2, 5]),
    MultiBinary(3),
    Tuple((Discrete(2), Box(-1.0, 1.0, shape=(1,), dtype=np.float32))),
]


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.data())
def test_any_action_row_is_a_value_inside_each_space_and_encodes_back(data: st.DataObject) -> None:
    chosen = data.draw(st.lists(st.sampled_from(range(len(ACT_SAMPLED))), min_size=1, max_size=5))
    space_list = [ACT_SAMPLED[i] for i in chosen]
    layout = ActionLayout([f"env.{i}" for i in range(len(space_list))], space_list)
    unit = st.floats(-1.0, 1.0, allow_nan=False, width=32)
    cont = np.array(data.draw(st.lists(unit, min_size=layout.continuous, max_size=layout.continuous)), np.float32)
    disc = np.array([data.draw(st.integers(0, n - 1)) for n in layout.branches], np.int32)
    values = layout.values(cont, disc)
    for space, value in zip(space_list, values):
        assert space.contains(value), (space, value)
    back_cont, back_disc = layout.encode(values)
    assert back_disc.tolist() == disc.tolist()
    np.testing.assert_allclose(back_cont, cont, atol=1e-5)
