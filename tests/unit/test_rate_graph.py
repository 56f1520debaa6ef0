"""The header's samples-per-second graph: bars measured from zero."""

from __future__ import annotations

from livesym.ui.graph import rate_graph


def rows(values: list[int], width: int, height: int = 1) -> list[str]:
    return rate_graph(values, width, height).plain.split("\n")


def test_a_sleeping_target_draws_no_bars():
    assert rows([0, 0, 0], 5) == ["     "]


def test_the_first_second_is_one_bar_on_the_right_not_a_wall():
    assert rows([99], 5) == ["    █"]


def test_bars_are_scaled_from_zero_not_from_the_smallest_value():
    # A steady rate with a dip of one sample is a steady graph, not a cliff.
    assert rows([400, 399, 400], 3) == ["███"]
    assert rows([50, 100], 2) == ["▄█"]


def test_any_sample_shows_and_only_the_newest_fit():
    assert rows([1, 1000], 2) == ["▁█"]
    assert rows(list(range(1, 11)), 3) == ["▇██"]


def test_a_steady_rate_s_noise_draws_the_same_bars():
    # The scale is the largest value rounded down to a quarter power of two (181 here):
    # 185-200 samples a second are all full bars, so nothing is sent again for them.
    assert rows([200, 196, 199, 185], 4) == ["████"]
    assert rows([200, 196, 199, 185, 120], 5) == ["████▅"]


def test_several_rows_stack_eighths_from_the_bottom():
    assert rows([4, 8, 16], 3, height=2) == ["  █", "▄██"]
    assert rows([3, 16], 2, height=2) == [" █", "▃█"]


def test_nothing_to_draw_in_no_room():
    assert rate_graph([5], 0, 3).plain == ""
    assert rate_graph([5], 4, 0).plain == ""
