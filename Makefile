# Thin entry points: each target runs one script, which installs what it needs
# (idempotently, at the versions pinned in scripts/versions.env and package-lock.json).
.PHONY: test bench pkg dev chaos

test:
	scripts/test.sh

bench:
	scripts/bench.sh

pkg:
	scripts/pkg.sh

dev:
	scripts/dev.sh

chaos:
	scripts/chaos.sh
