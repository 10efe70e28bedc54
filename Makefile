# Entry points; README explains them.
SHELL := /bin/bash
.PHONY: setup demo test unit integration build-kcm down bench docs

setup:            ## venv + control-plane binaries + collection link (idempotent)
	tools/setup.sh

demo: setup       ## three local clusters with CRDs at an old version, then the fleet upgrade
	tools/demo.sh

test:             ## every test: pytest (unit + real control plane), sanity, lint, molecule
	tools/test.sh

unit:
	. tools/env.sh && python -m pytest tests/unit -q

integration:
	. tools/env.sh && python -m pytest tests/integration -q -rfE

build-kcm:        ## also build kube-controller-manager (benchmark against the in-tree migrator)
	tools/setup.sh --with-kcm

down:             ## stop clusters left running by `make demo`
	. tools/env.sh && python -m tests.controlplane down

bench:            ## migration benchmark vs ceiling / in-tree / kubectl (~40 min; ARGS=--quick|--large|--reps N)
	. tools/env.sh && python benchmarks/run.py $(ARGS)

docs:             ## HTML docs site (modules, role, guides) into build/docs/html, offline
	. tools/env.sh && tools/docs.sh
