"""`LiveChecklists.warm_up`: imports the checklist machinery and the Kubernetes REST client, in a
fresh interpreter (this one has imported everything already), and leaves the collector on."""

from __future__ import annotations

import json
import subprocess
import sys

CODE = """
import gc, json, sys
from oncall.service.sources import LiveChecklists
from oncall.settings import Settings
before = [m for m in ("oncall.backends.kube_exec", "oncall.service.checklists") if m in sys.modules]
LiveChecklists(Settings()).warm_up()
after = [m for m in ("oncall.backends.kube_exec", "oncall.service.checklists") if m in sys.modules]
print(json.dumps({"before": before, "after": after, "gc_on": gc.isenabled(),
                  "frozen": gc.get_freeze_count()}))
"""


def test_warm_up_imports_the_machinery_and_freezes_it() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CODE], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["before"] == []
    assert seen["after"] == ["oncall.backends.kube_exec", "oncall.service.checklists"]
    assert seen["gc_on"] is True
    assert seen["frozen"] > 10_000  # the imported modules' objects, out of later collections
