"""The sparkline of the board's "Last hour" column: time-true slots, scaled heights, gaps."""

from __future__ import annotations

import math

from oncall.tui.format import SPARK_LEVELS, sparkline

START, END = 1000.0, 1000.0 + 3600


def test_values_land_in_their_time_slot_scaled_between_the_lowest_and_highest() -> None:
    points = [(START + 300, 1.0), (START + 2100, 5.0), (END - 100, 9.0)]
    # 12 slots of 300 s: slot 1, slot 7, slot 11; 5 is half way up the eight levels.
    assert sparkline(points, START, END, 12) == " ▁     ▅   █"


def test_a_slot_shows_the_highest_value_in_it() -> None:
    points = [(START + 10, 0.0), (START + 20, 8.0), (START + 400, 0.0), (START + 410, 1.0)]
    # Slot 0 holds 8 (not 0), slot 1 holds 1 (not 0): the lowest shown is 1.
    assert sparkline(points, START, END, 12) == "█▁          "


def test_a_flat_series_is_a_flat_line_and_gaps_stay_gaps() -> None:
    points = [(START + 150 + 300 * i, 0.25) for i in range(12) if i not in (4, 5)]
    assert sparkline(points, START, END, 12) == "▁▁▁▁  ▁▁▁▁▁▁"


def test_points_outside_the_window_and_non_finite_values_are_left_out() -> None:
    points = [
        (START - 1, 100.0),
        (END + 1, 100.0),
        (START + 100, math.nan),
        (START + 500, math.inf),
        (START + 900, 2.0),
        (START + 1200, 4.0),
    ]
    assert sparkline(points, START, END, 12) == "   ▁█       "


def test_nothing_to_show_is_an_empty_cell() -> None:
    assert sparkline([], START, END, 12) == ""
    assert sparkline([(START - 5, 1.0)], START, END, 12) == ""
    assert sparkline([(START + 5, 1.0)], START, END, 0) == ""
    assert sparkline([(START + 5, 1.0)], END, START, 12) == ""


def test_every_level_is_reachable() -> None:
    points = [(START + 450 * i + 1, float(i)) for i in range(8)]
    assert sparkline(points, START, END, 8) == SPARK_LEVELS
