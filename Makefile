# Entry points; README explains them. CRDOPS_LEG=2.16 selects the oldest-ansible venv (tools/env.sh).
SHELL := /bin/bash
.PHONY: setup demo test test-oldest ci unit typecheck integration build-kcm down bench docs docs-reliability docs-report

setup:            ## venv + control-plane binaries + collection link (idempotent)
	tools/setup.sh

demo: setup       ## three local clusters with CRDs at an old version, then the fleet upgrade
	tools/demo.sh

test:             ## every test on the main line (ansible-core 2.21): pytest (unit + real control plane), sanity, lint, molecule
	tools/test.sh

test-oldest:      ## the oldest claimed ansible-core (2.16): unit, sanity, the role's end-to-end proof
	CRDOPS_LEG=2.16 tools/setup.sh
	CRDOPS_LEG=2.16 tools/test.sh --oldest

ci:               ## what .ci/run does: both legs, each in its own cached venv
	.ci/run

typecheck:        ## the type and lint gate: mypy --strict on the engine, ruff (settings in pyproject.toml)
	tests/sanity/typecheck.sh

unit:
	. tools/env.sh && python -m pytest tests/unit -q

integration:
	. tools/env.sh && python -m pytest tests/integration -q -rfE

docs-reliability: ## regenerate the tracked docs/reliability.md from a green run of the fault scenarios
	. tools/env.sh && CRDOPS_WRITE_DOCS=1 python -m pytest tests/integration -q -rfE --timeout=900

docs-report:      ## regenerate the JSON example in docs/report.md from the report code (tools/report_example.py)
	. tools/env.sh && python tools/report_example.py --write

build-kcm:        ## also build kube-controller-manager (benchmark against the in-tree migrator)
	tools/setup.sh --with-kcm

down:             ## stop clusters left running by `make demo`
	. tools/env.sh && python -m tests.controlplane down

bench:            ## benchmark: gentleness + role (< 25 min; ARGS=--quick | --suites throughput,fleet | --reps N)
	. tools/env.sh && python benchmarks/run.py $(ARGS)

docs:             ## HTML docs site (modules, role, guides) into build/docs/html, offline
	. tools/env.sh && tools/docs.sh
