# Thin entry points: each target runs one script, which installs what it needs
# (idempotently, at the versions pinned in scripts/versions.env and package-lock.json).
.PHONY: test test-core test-pkg test-service bench pkg dev chaos sim proof

# Every part below, in this order (CI runs this).
test:
	scripts/test.sh

# fmt, clippy, no_std builds, cargo tests, the fleet simulation, wasm-pack tests
test-core:
	scripts/test.sh core

# the npm package: build, TS declarations, Node 20 + Chromium + workerd, the packaging matrix
test-pkg:
	scripts/test.sh pkg

# the Worker as deployed (dry run, size), the service tests, the chaos short form
test-service:
	scripts/test.sh service

bench:
	scripts/bench.sh

pkg:
	scripts/pkg.sh

dev:
	scripts/dev.sh

chaos:
	scripts/chaos.sh

# the world simulation: 276 colos, today's design vs regional allocators (docs/benchmarks.md)
sim:
	scripts/sim.sh

# the core's property tests at length under a new random seed, printed to
# replay (PROOF_SEED, PROOF_SCALE); make test runs them under a fixed seed
proof:
	scripts/proof.sh
