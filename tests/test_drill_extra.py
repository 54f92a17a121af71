"""Without the `drill` extra, `oncall drill ...` says how to install it, and the rest still works.

The app's own virtualenv has the extra (make setup installs `.[dev,drill]`), so each command here
runs in a child process whose `sitecustomize` marks the extra's modules as absent the way Python
itself does for a module it cannot import: `sys.modules[name] = None` makes `import name` raise
ModuleNotFoundError and `importlib.util.find_spec(name)` return None. A first check proves the
blocking works, so that the tests below cannot pass because aiohttp was importable after all.
A plain `pip install oncall` still brings aiohttp, as a dependency of kubernetes>=37: the
check looks for all three of the extra's libraries, and the last test runs that case.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from oncall.cli.drill_cmd import EXTRA_MODULES

ONCALL = Path(sys.executable).with_name("oncall")


def blocking(tmp_path: Path, modules: tuple[str, ...]) -> dict[str, str]:
    """An environment in which `modules` cannot be imported."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        f"import sys\nfor name in {modules!r}:\n    sys.modules[name] = None\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH", "")]))
    return env


@pytest.fixture
def without_extra(tmp_path: Path) -> dict[str, str]:
    """aiohttp, jsonpatch and trustme cannot be imported."""
    return blocking(tmp_path, EXTRA_MODULES)


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, capture_output=True, text=True, env=env, cwd=cwd, check=False, timeout=60
    )


def test_the_extra_is_really_blocked(without_extra: dict[str, str], tmp_path: Path) -> None:
    proc = _run([sys.executable, "-c", "import aiohttp"], without_extra, tmp_path)
    assert proc.returncode == 1
    assert "ModuleNotFoundError" in proc.stderr
    # ... and only in that environment: the app's virtualenv has the extra.
    assert (
        _run([sys.executable, "-c", "import aiohttp"], dict(os.environ), tmp_path).returncode == 0
    )


@pytest.mark.parametrize(
    "argv",
    [["up"], ["status"], ["scenarios"], ["inject", "kv-cache-pressure"], []],
    ids=["up", "status", "scenarios", "inject", "bare"],
)
def test_drill_without_the_extra_prints_the_install_hint(
    argv: list[str], without_extra: dict[str, str], tmp_path: Path
) -> None:
    proc = _run([str(ONCALL), "drill", *argv], without_extra, tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "oncall drill needs the drill extra (missing: aiohttp, jsonpatch, trustme): "
        "pip install 'oncall[drill]'"
    ]
    assert proc.stdout == ""
    assert list(tmp_path.iterdir()) == [tmp_path / "site"]  # nothing started, no .drill/


def test_the_app_itself_needs_no_extra(without_extra: dict[str, str], tmp_path: Path) -> None:
    for argv in (["--help"], ["drill", "--help"], ["config", "show"]):
        proc = _run([str(ONCALL), *argv], without_extra, tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr


def test_aiohttp_alone_is_not_the_extra(tmp_path: Path) -> None:
    """`pip install oncall` brings aiohttp anyway (kubernetes>=37 requires it), not the rest."""
    env = blocking(tmp_path, ("jsonpatch", "trustme"))
    assert _run([sys.executable, "-c", "import aiohttp"], env, tmp_path).returncode == 0
    proc = _run([str(ONCALL), "drill", "up"], env, tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "oncall drill needs the drill extra (missing: jsonpatch, trustme): "
        "pip install 'oncall[drill]'"
    ]
