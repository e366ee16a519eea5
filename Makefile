# The two commands of the README: `make demo` (whole pipeline on embedded defaults) and
# `make test` (everything CI runs). Both install and build first.
SHELL := /bin/bash
export ONNXRUNTIME_NODE_INSTALL := skip

.PHONY: check-node setup build build-dev typecheck lint format test test-unit trainer trainer-test demo hat-effect bench clean

# Before anything is installed: a clear message when this Node.js is outside the supported range.
check-node:
	@node infra/scripts/check-node.mjs

node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund

setup: check-node node_modules/.package-lock.json

# What runs in production and in the worker image: cli/ queues/ workers/ shared/, without tests,
# test support (testing/ folders) or benchmarks.
build: setup
	npx tsc -p tsconfig.build.json

# build, plus the benchmarks (bench/) and the test support they and the tests spawn. Incremental
# build mode keeps dist/tsconfig.dev.tsbuildinfo: with no input newer than the last build it only
# compares timestamps (about a second), after an edit it re-checks what the edit affects; type
# errors fail it as they fail a plain build. jest's global setup builds the same way.
build-dev: setup
	npx tsc -b tsconfig.dev.json

# The trainer (trainer/, Python): a virtual environment from its pinned lock, rebuilt when the lock
# changes. PYTHON picks the interpreter (3.10-3.13); TRAINER_PIP_FLAGS adds pip options (an index).
PYTHON ?= python3
TRAINER_PIP_FLAGS ?= --retries 1
trainer/.venv/.installed: trainer/requirements.lock
	rm -rf trainer/.venv
	$(PYTHON) -m venv trainer/.venv
	trainer/.venv/bin/pip install --disable-pip-version-check --quiet $(TRAINER_PIP_FLAGS) -r trainer/requirements.lock
	touch $@

trainer: trainer/.venv/.installed

trainer-test: trainer
	cd trainer && .venv/bin/python -m pytest -q -p no:cacheprovider

typecheck: setup
	npx tsc -p tsconfig.json --noEmit

# Formatting (Prettier), lint rules (ESLint, typescript-eslint) and the layer rules (which folder may import which).
lint: setup
	npx prettier --check --log-level warn .
	npx eslint --max-warnings 0 .
	node infra/scripts/layer-imports.mjs

format: setup
	npx prettier --write --log-level warn .
	npx eslint --fix .

# Every Jest project: unit, golden and integration (jest.config.js).
test: build-dev typecheck lint trainer-test
	bash infra/scripts/ensure-redis.sh
	npx jest --runInBand

# The fast loop: the `unit` Jest project, the tests beside the code (no Redis, no S3 server, no
# trainer), on every core (Jest's default keeps one core for itself: one worker on a 2-core
# machine). JEST_WORKERS overrides. It leaves out the `golden` project (`*.golden.test.ts`: every
# registry tokenizer and shipped chat template against recorded golden files, Hugging Face's own
# output and Python Jinja) and `integration` (test/): `make test`, what CI runs, runs all three.
JEST_WORKERS ?= $(shell nproc 2>/dev/null || echo 2)
test-unit: build-dev
	npx jest --selectProjects unit --maxWorkers=$(JEST_WORKERS)

demo: build trainer
	bash infra/scripts/ensure-redis.sh
	node dist/cli/main.js demo $(DEMO_ARGS)

# The HAT effect (docs/hat-effect.md): fixed-harness SFT vs HSA-SFT, then OPD and RL, 3 seeds each, trained and evaluated here.
hat-effect: build trainer
	bash infra/scripts/ensure-redis.sh
	node dist/cli/main.js demo --config examples/hat-effect.yaml $(HAT_EFFECT_ARGS)

bench: build-dev trainer
	bash infra/scripts/ensure-redis.sh
	for b in dist/bench/*.bench.js; do node "$$b" || exit 1; done

clean:
	rm -rf dist
