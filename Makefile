# make setup | make test | make demo | make bench — see README.md.
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup system-deps test lint demo bench clean

setup: $(STAMP) system-deps

$(STAMP): pyproject.toml scripts/setup-venv.sh
	./scripts/setup-venv.sh
	touch $(STAMP)

system-deps:
	./scripts/setup-system.sh

lint: setup
	$(BIN)/ruff check . scripts/gpu-check
	$(BIN)/ruff format --check . scripts/gpu-check
	$(BIN)/mypy oncall oncall_drill tests scripts scripts/gpu-check
	$(BIN)/lint-imports
	promtool check rules alerts/*.yaml
	promtool test rules alerts/tests/*.test.yaml

# Two workers: most tests wait on servers, not the CPU. The drill tests stay on one worker
# (xdist_group "drill", see tests/drill/stack/conftest.py): one drill, not one per worker.
test: lint
	$(BIN)/pytest -n 2 --dist loadgroup

# The .pyc files up front: where PYTHONDONTWRITEBYTECODE is set, the app would otherwise compile
# oncall's sources at every start (a quarter of a second before the first frame).
demo: setup
	$(BIN)/python -m compileall -q oncall oncall_drill
	./scripts/demo.sh

# Short defaults; docs/PERFORMANCE.md's RSS figure comes from `tui.py --minutes 10`.
bench: setup
	$(BIN)/python scripts/bench/startup.py
	$(BIN)/python scripts/bench/drill_env.py
	$(BIN)/python scripts/bench/alerts_refresh.py
	$(BIN)/python scripts/bench/checklist.py
	$(BIN)/python scripts/bench/tui.py --minutes 2

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
