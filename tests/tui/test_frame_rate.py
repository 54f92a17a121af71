"""The app draws up to 120 frames a second (issue 15.2: a key press waits at most 8.3 ms for
the next frame), unless the user's environment sets Textual's own TEXTUAL_FPS."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from oncall.cli.main import FRAME_RATE, cap_frame_rate

#: What `oncall` runs before it imports the app, then the screens' frame period as Textual
#: took it (textual.screen reads TEXTUAL_FPS once, at import).
PROBE = (
    "from oncall.cli.main import prepare_app_start; prepare_app_start(); "
    "from textual import screen; print(round(1 / screen.UPDATE_PERIOD))"
)


def frames_a_second(**env: str) -> int:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TEXTUAL")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return int(done.stdout)


def test_the_app_starts_at_its_own_frame_rate() -> None:
    assert FRAME_RATE == 120
    assert frames_a_second() == FRAME_RATE


@pytest.mark.parametrize("fps", ["30", "240"])
def test_a_frame_rate_the_user_set_is_kept(fps: str) -> None:
    assert frames_a_second(TEXTUAL_FPS=fps) == int(fps)


def test_cap_frame_rate_sets_only_what_is_unset() -> None:
    environ: dict[str, str] = {}
    cap_frame_rate(environ)
    assert environ == {"TEXTUAL_FPS": "120"}
    environ = {"TEXTUAL_FPS": "45"}
    cap_frame_rate(environ)
    assert environ == {"TEXTUAL_FPS": "45"}
