# Two commands on a fresh machine: `make demo` runs the demo, `make test` the tests
# (`make check`: lint, types and the quick tests, for the edit-test loop).
# Each creates the virtual environment .venv if needed and installs what it needs.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# --no-compile: pip would byte-compile every module of every package (all of torch, its
# tests too), most of an install's CPU; Python compiles what is imported, once (below).
PIP    := $(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile \
          -c constraints.txt

# Bytecode is cached: every Dask worker process the tests start imports labkit, and
# compiling it from source each time costs about 0.35 s a process (issue 45).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo lint check test coverage soak soak-loaded bench docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip

$(VENV)/.demo: $(BIN)/python pyproject.toml constraints.txt
	$(PIP) -e ".[demo]"
	touch $@

$(VENV)/.test: $(BIN)/python pyproject.toml constraints.txt
	$(PIP) -e ".[test,demo]"
	touch $@

demo: $(VENV)/.demo
	$(BIN)/labkit demo

# Two tiers.  `make check`: lint, format and types (pyproject.toml's [tool.ruff] and
# [tool.mypy]), then the tests marked neither slow nor browser (tests/tiers.py), in a few
# minutes.  `make test` (the README's command, and CI's): the same checks, then every test,
# on $(WORKERS) xdist workers, a file to a worker (--dist loadfile: a module's fixtures are
# made once), the longest files first (tests/ordering.py, not xdist's most-tests-first),
# then the tests marked serial alone.  `make coverage`: the same run under coverage,
# combined across the workers and the passes, whose figure is printed at the end
# (tests/coverage_figure.py): read, never asserted.
# Three workers on two cores: the suite waits more than it computes (two workers kept the
# cores 80% busy, three keep them 95%), and its parallel pass took 15:45 against 19:27 on
# one machine (benchmarks/RESULTS.md, issue 45).
WORKERS ?= 3
PYTEST  := $(BIN)/python -m pytest -n $(WORKERS) --dist loadfile --no-loadscope-reorder
# Coverage is not in `make test`: Python 3.11's tracer slows every Python call of the
# tests' own processes, and made a mix of seven heavy files take 149 s of CPU against 89 s
# without it (benchmarks/RESULTS.md, issue 45), minutes of the 20 `make test` has on two
# cores.  `make coverage` (or `make test COVERAGE=yes`) runs it with the tracer.
COVERAGE ?= no
COV      := $(if $(filter yes,$(COVERAGE)),--cov --cov-report=,)

lint: $(VENV)/.test
	$(BIN)/ruff check labkit
	$(BIN)/ruff format --check labkit
	$(BIN)/mypy labkit

check: lint
	$(PYTEST) -q -m "not slow and not browser and not serial"
	$(BIN)/python -m pytest -q -m "serial and not slow and not browser" \
	    $$($(BIN)/python -m tests.tiers) || [ $$? -eq 5 ]

# The two passes run at once.  The serial tests (they bound a board's lag, a fit's overhead,
# lifetimes) leave the cores about half idle for five minutes, so the parallel pass runs
# beside them at a lower priority ($(NICE)), in a session of its own whose autogroup is
# lowered too (tests/low_priority.py: Linux shares the CPU between sessions first): it
# takes what they leave, and they keep most of the cores when both want all.  A Ctrl-C
# reaches it through its process group.  Under coverage, each pass writes its own data,
# combined at the end: the serial pass's in a folder of its own, since the parallel pass's
# pytest-cov combines every data file beside its own.  The serial pass's output is printed
# when it ends; lint and types run beside both.  A failing pass still lets the other finish
# and the coverage print, then fails.  Each pass lists its slowest tests, where the suite's
# time goes (issue 45).  `make test OVERLAP=no`: the serial pass after the parallel one.
# 12, below the 10 a board's drawing thread takes (labkit/views/priority.py): a notebook's
# board in the serial pass draws before the parallel pass's work.
NICE    ?= 12
OVERLAP ?= yes
SERIAL  := COVERAGE_FILE=test-artifacts/serial/.coverage \
           $(BIN)/python -m pytest -m serial $(COV) --durations=10 \
           $$($(BIN)/python -m tests.tiers)
test: $(VENV)/.test
	mkdir -p test-artifacts
	$(BIN)/python -m coverage erase
	rm -rf test-artifacts/serial && mkdir -p test-artifacts/serial
	status=0; \
	nice -n $(NICE) $(MAKE) --no-print-directory lint > test-artifacts/lint.log 2>&1 & lint=$$!; \
	if [ "$(OVERLAP)" = yes ]; then \
	    { $(SERIAL) > test-artifacts/serial/log 2>&1; echo $$? > test-artifacts/serial/rc; } & \
	    serial=$$!; \
	fi; \
	$(BIN)/python -m tests.low_priority $(NICE) $(PYTEST) -m "not serial" $(COV) \
	    --durations=30 & par=$$!; \
	trap 'kill -INT -$$par 2>/dev/null' INT TERM; \
	wait $$par || status=$$?; wait $$par 2>/dev/null; trap - INT TERM; \
	wait $$lint || status=$$?; cat test-artifacts/lint.log; \
	if [ "$(OVERLAP)" = yes ]; then \
	    wait $$serial; cat test-artifacts/serial/log; s=$$(cat test-artifacts/serial/rc); \
	else \
	    s=0; $(SERIAL) || s=$$?; \
	fi; \
	[ $$s -eq 0 ] || [ $$s -eq 5 ] || status=$$s; \
	[ "$(COVERAGE)" != yes ] || { \
	    $(BIN)/python -m coverage combine --append test-artifacts/serial/.coverage; \
	    $(BIN)/python tests/coverage_figure.py; }; \
	exit $$status

# Every test, as `make test`, under coverage; its figure at the end.
coverage:
	$(MAKE) --no-print-directory test COVERAGE=yes

# The worker-loss, cancel and stress tests (marked `soak`), ten whole runs; a tally of each.
soak: $(VENV)/.test
	$(BIN)/python tests/soak.py --times 10

# The same, with two busy-looping processes beside it: the tests must hold on a loaded machine.
soak-loaded: $(VENV)/.test
	$(BIN)/python tests/soak.py --times 10 --busy 2

# The user guide, the notebooks (rendered by myst-nb, not executed) and the API reference
# from the docstrings (docs/), warnings as errors, into docs/_build/html. torch and the
# views' libraries are installed so that every module imports.
$(VENV)/.docs: $(BIN)/python pyproject.toml constraints.txt
	$(PIP) -e ".[docs,views,demo,torch]"
	touch $@

docs: $(VENV)/.docs
	$(BIN)/python -m sphinx -W --keep-going -b html docs docs/_build/html

bench: $(VENV)/.test
	$(BIN)/python benchmarks/bench_core.py
	$(BIN)/python benchmarks/bench_modes.py
	$(BIN)/python benchmarks/bench_scaling.py
	$(BIN)/python benchmarks/bench_join.py
	$(BIN)/python benchmarks/bench_copies.py
	$(BIN)/python benchmarks/bench_views.py
	$(BIN)/python benchmarks/bench_pipeline.py
	$(BIN)/python benchmarks/bench_data_parallel.py
	$(BIN)/python benchmarks/bench_ensemble.py
	$(BIN)/python benchmarks/bench_collector.py
	$(BIN)/python benchmarks/bench_sweep.py
	$(BIN)/python benchmarks/bench_store_changes.py
	$(BIN)/python benchmarks/bench_groups.py
	$(BIN)/python benchmarks/bench_group_kill.py
	$(BIN)/python benchmarks/bench_model_sync.py
	$(BIN)/python benchmarks/bench_checkpoints.py
	$(BIN)/python benchmarks/bench_group_checkpoint.py
	$(BIN)/python benchmarks/bench_elastic.py
	$(BIN)/python benchmarks/bench_elastic_fit.py
	$(BIN)/python benchmarks/bench_objectives.py
	$(BIN)/python benchmarks/bench_pareto_view.py

clean:
	rm -rf $(VENV) build *.egg-info docs/_build
