"""The text chart: threshold row, state shading, markers, and the compact sparkline."""

from __future__ import annotations

from oncall.model.chart import FIRING, MARKER, PENDING, ChartData, Marker, plain, render, slots

T0 = 1_767_225_600.0  # 2026-01-01 00:00 UTC


def climbing(threshold: float = 0.9) -> ChartData:
    """An hour: flat at 0.5, then up to 1.0 over the threshold in the last 20 minutes."""
    points = tuple(
        (T0 - 3600 + 15 * i, 0.5 + 0.5 * min(1.0, max(0.0, (15 * i - 2400) / 600)))
        for i in range(241)
    )
    periods = ((T0 - 900, T0 - 600, "pending"), (T0 - 600, T0, "firing"))
    return ChartData(
        "KV cache",
        T0 - 3600,
        T0,
        points,
        (">", threshold),
        periods,
        (Marker(T0 - 300, "set-max-num-seqs verified"),),
    )


def test_full_chart_has_axes_threshold_band_and_marker() -> None:
    lines = plain(render(climbing(), 100, 14))
    assert lines[0].startswith("KV cache") and "threshold > 0.9" in lines[0]
    assert lines[1].lstrip().startswith("1 ┤")  # the top label is the highest value
    assert any(line.lstrip().startswith("0.5 ┤") for line in lines)
    assert any(line.count("┄") > 20 for line in lines[1:])  # the threshold row
    band = next(line for line in lines if "└" in line)
    assert PENDING in band and FIRING in band and MARKER in band
    # the marker sits in the firing part, left of the end: 5 of 60 minutes from the right
    assert band.index(MARKER) > band.index(FIRING)
    assert "00:00" in lines[-2] and "23:00" in lines[-2]
    assert lines[-1] == f"{MARKER} 23:55 set-max-num-seqs verified"
    assert all(len(line) <= 100 for line in lines)


def test_cells_over_the_threshold_have_their_own_kind_and_keep_the_state() -> None:
    rows = render(climbing(), 100, 14)
    kinds = {kind for row in rows for _, kind in row}
    assert {"line", "over+firing", "threshold", "marker", "axis"} <= kinds
    # flat 0.5 is under the threshold: never "over" outside the periods
    assert "over" not in kinds


def test_small_or_compact_is_a_sparkline_with_min_and_max() -> None:
    for lines in (
        plain(render(climbing(), 80, 14, compact=True)),
        plain(render(climbing(), 50, 30)),
    ):
        assert lines[0] == "KV cache  threshold > 0.9"
        assert lines[1].startswith("min 0.5 ") and lines[1].endswith(" max 1")
        assert "▁" in lines[1] and "█" in lines[1]
        assert PENDING in lines[2] and FIRING in lines[2] and MARKER in lines[2]
        assert lines[3].startswith(f"{MARKER} 23:55")


def test_a_floor_draws_each_slots_dip_not_its_peak() -> None:
    """Four points a slot: a hit rate that dips to 0.3 once. Judged against `< 0.8` the slot
    holding the dip shows 0.3 (over-kind); judged against `> 0.9`, its peak 0.95."""
    points = tuple((T0 - 600 + 15 * i, 0.3 if i == 9 else 0.95) for i in range(40))
    floor = ChartData("hit", T0 - 600, T0, points, ("<", 0.8))
    ceiling = ChartData("hit", T0 - 600, T0, points, (">", 0.9))
    assert slots(floor, 10)[2] == 0.3 and slots(ceiling, 10)[2] == 0.95
    assert [v for i, v in enumerate(slots(floor, 10)) if i != 2] == [0.95] * 9
    # A second, deeper dip (the chart's bottom) leaves the first one a block to draw: it is
    # drawn as the unhealthy side.
    deeper = ChartData("hit", T0 - 600, T0, (*points, (T0 - 90, 0.1)), ("<", 0.8))
    kinds = {kind for row in render(deeper, 80, 14) for _, kind in row}
    assert "over" in kinds


def test_no_points_says_why() -> None:
    empty = ChartData("x", T0 - 60, T0, error="prometheus at http://127.0.0.1:1: refused")
    assert plain(render(empty, 100, 12))[1] == "prometheus at http://127.0.0.1:1: refused"
    assert plain(render(ChartData("x", T0 - 60, T0), 40, 5))[1] == "no samples in this window"


def test_a_flat_series_and_gaps_stay_readable() -> None:
    points = tuple((T0 - 3600 + 60 * i, 2.0) for i in range(30))  # the second half missing
    lines = plain(render(ChartData("flat", T0 - 3600, T0, points), 100, 12))
    plot = [line for line in lines if "┤" in line or "│" in line]
    assert plot and all(len(line) < 70 for line in plot)  # nothing drawn in the gap


def test_json_has_the_series() -> None:
    body = climbing().to_json()
    assert body["threshold"] == [">", 0.9] and len(body["points"]) == 241  # type: ignore[arg-type]
    assert body["markers"] == [{"at": T0 - 300, "label": "set-max-num-seqs verified"}]
