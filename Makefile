# The two commands of the README: `make demo` (whole pipeline on embedded defaults) and
# `make test` (everything CI runs). Both install and build first.
SHELL := /bin/bash
export ONNXRUNTIME_NODE_INSTALL := skip

.PHONY: setup build typecheck test test-unit demo bench clean

node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund

setup: node_modules/.package-lock.json

build: setup
	npx tsc -p tsconfig.build.json

typecheck: setup
	npx tsc -p tsconfig.json --noEmit

test: build typecheck
	bash infra/scripts/ensure-redis.sh
	npx jest --runInBand

demo: build
	bash infra/scripts/ensure-redis.sh
	node dist/cli/main.js demo $(DEMO_ARGS)

bench: build
	bash infra/scripts/ensure-redis.sh
	for b in dist/bench/*.bench.js; do node "$$b" || exit 1; done

clean:
	rm -rf dist
