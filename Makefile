# Two commands set everything up on a fresh clone: `make demo` and `make test`.
# Every pip call goes through constraints.txt, which pins torch==2.13.0 (a bare torch pulls GBs of CUDA).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
STAMP := $(VENV)/.installed

.PHONY: install demo test test-fast browser lint docs format bench clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -c constraints.txt -e ".[video,track,plot,mujoco,box2d,atari,ray,export,multiagent,stats,docs,dev]" 2>&1 | grep -v "^WARNING: Location" || true
	$(PY) -c "import torch, gymnasium, proxima; assert torch.__version__.startswith('2.13.0'), torch.__version__"
	touch $(STAMP)

install: $(STAMP)

# Train PPO on CartPole-v1 with the defaults, then score the saved agent on Gymnasium's own env.
demo: $(STAMP)
	rm -rf runs/demo
	$(VENV)/bin/proxima train --env-id CartPole-v1 --run-dir runs/demo
	$(VENV)/bin/proxima eval runs/demo --episodes 100 --deterministic

# pytest-xdist: one worker per core, and one more. The Ray tests run in turn on one worker (their xdist_group)
# and wait on Ray's processes about a third of their time; the extra worker fills that wait (-n 2 against -n 3
# on 2 cores: docs/journal/benchmarks.md, "Suite time"). The automatic torch thread count follows the load
# (proxima/run/threads.py), so every test that compares two runs fixes it or uses minibatches that take 1 thread
# anyway; the learning tests pass with 1 thread or 2 (measured sequential, with -n 2 and with -n 3).
# `serial` tests (a two-node ray.cluster_utils.Cluster) run alone, after the others: such a cluster names itself
# in /tmp/ray/ray_current_cluster and SIGTERMs its nodes when it stops, so any Ray client on the machine that
# gives no address joins it and dies with it. proxima starts Ray with address "local" and never joins it, so the
# sweep killed with SIGKILL and resumed runs with the others (docs/journal/benchmarks.md, the Ray flake under load).
TEST_WORKERS := $(shell echo $$(( $$(nproc) + 1 )))
# OpenMP threads that wait passively: the suite keeps every core busy, and a 2-thread run's threads spinning for
# each other there took twice the CPU (the 2-thread cartpole-fast test beside one busy process: 61 core-seconds
# with libgomp's default wait, 25-29 passive). The wait policy changes no result (docs/journal/benchmarks.md); a
# lone run spins, which is faster on free cores, so proxima leaves it to the user. tests/conftest.py sets the
# same for a bare pytest.
TEST_ENV := OMP_WAIT_POLICY=PASSIVE
test: $(STAMP) browser $(MERMAID)
	$(TEST_ENV) $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup -m "not serial"
	$(TEST_ENV) $(PY) -m pytest -q -m serial

# tests/test_report_browser.py opens `proxima report`'s page in Debian's Chromium (Playwright drives it; the dev
# extra installs Playwright). As root, install Chromium with apt-get; otherwise that test is skipped, saying how.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium for the browser test"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "note: apt-get could not install chromium: the browser test will be skipped"; \
	  else echo "note: no Chromium and no root: the browser test will be skipped (apt-get install chromium)"; fi; }

# Mermaid's script for the docs' diagrams (docs/ARCHITECTURE.md), served by the site itself: mkdocs-material would
# otherwise fetch it from unpkg.com, and the site must work offline (tests/test_docs_site.py). It comes from the npm
# registry, pinned by version and checksum, and is not committed (3.5 MB). Without npm the diagram shows as text.
MERMAID := docs/javascripts/mermaid.min.js
MERMAID_VERSION := 11.17.2
MERMAID_SHA256 := 581ed7d74bd9048d0e3a91363927d72ef22942d7722546b27f7cc29e35390eb8
$(MERMAID):
	@command -v npm >/dev/null 2>&1 || { echo "note: no npm: the docs' diagrams will show as text (apt-get install npm)"; exit 0; }; \
	tmp=$$(mktemp -d) && (cd $$tmp && npm pack --silent mermaid@$(MERMAID_VERSION) >/dev/null \
	  && tar xzf mermaid-$(MERMAID_VERSION).tgz package/dist/mermaid.min.js) \
	  && echo "$(MERMAID_SHA256)  $$tmp/package/dist/mermaid.min.js" | sha256sum -c --quiet \
	  && mkdir -p $(dir $(MERMAID)) && mv $$tmp/package/dist/mermaid.min.js $(MERMAID); \
	status=$$?; rm -rf $$tmp; exit $$status

# Everything except the learning tests that train agents for several seconds.
test-fast: $(STAMP)
	$(TEST_ENV) $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup -m "not slow and not serial"

# ruff (with C901's complexity limit), no hand layout in proxima/, mypy, then the import layers (import-linter):
# no cycles, envs never import the policy, the CLI on top. .pre-commit-config.yaml runs the same five
# (docs/DEVELOPMENT.md, Checks).
lint: $(STAMP)
	$(VENV)/bin/ruff check proxima tests benchmarks
	$(VENV)/bin/ruff format --check proxima tests benchmarks
	! grep -rn 'fmt: skip\|fmt: off' proxima  # ruff format lays out the package: its wc -l counts code, not packing
	$(VENV)/bin/mypy  # the whole package at the strictness in pyproject.toml [tool.mypy]: zero errors
	$(VENV)/bin/lint-imports  # the layers in pyproject.toml and docs/ARCHITECTURE.md

# The docs site into site/ (mkdocs.yml). --strict: a broken link, a missing page or an API reference that does not
# resolve fails the build. `.venv/bin/python -m mkdocs serve` shows it while you write.
docs: $(STAMP) $(MERMAID)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet

format: $(STAMP)
	$(VENV)/bin/ruff format proxima tests benchmarks
	$(VENV)/bin/ruff check --fix proxima tests benchmarks

bench: $(STAMP)
	$(PY) benchmarks/throughput.py

clean:
	rm -rf $(VENV) runs site .pytest_cache .ruff_cache
