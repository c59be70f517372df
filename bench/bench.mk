# Side-by-side benchmark against the Go ansible-operator v1.42.3 (bench/, docs/benchmarks.md).
# Included by the Makefile (`include bench/bench.mk`); uses its venv, testbed-build and BIN.
#   make bench                 full run: 30-60 min on 2 cores, plus the fleet (about 2.5 h)
#   make bench-quick           small sizes: 10-15 min, plus the fleet of 1,000 (about 30-40 min)
#   make bench BENCH_ARGS='--scenarios latency --latency 10'
#   make bench-fleet           the fleet of 10,000 CRs and the steady scenario's idle figures
#   make bench-fleet-quick     the same with 1,000 CRs and shorter waits
#   make bench-fleet BENCH_ARGS='--fleet 3000'
# The reference is built once into $(ANSIBLE_OPERATOR_BENCH_CACHE) (default
# ~/.cache/ansible-operator-bench) with `go install` from the Go module proxy.

BENCH_ARGS ?=

.PHONY: bench
bench: venv testbed-build ## ours vs the Go ansible-operator (30-60 min + the fleet, ~2.5 h); bench/results/
	$(BIN)/python -m bench.run $(BENCH_ARGS)

.PHONY: bench-quick
bench-quick: venv testbed-build ## the same with small sizes (10-15 min + the fleet of 1,000, ~30-40 min)
	$(BIN)/python -m bench.run --quick $(BENCH_ARGS)

.PHONY: bench-fleet
bench-fleet: venv testbed-build ## the fleet of 10,000 CRs + steady's idle figures (about 2.5 h)
	$(BIN)/python -m bench.run --scenarios steady,fleet $(BENCH_ARGS)

.PHONY: bench-fleet-quick
bench-fleet-quick: venv testbed-build ## the fleet of 1,000 CRs, shorter waits (about 30-40 min)
	$(BIN)/python -m bench.run --quick --scenarios steady,fleet $(BENCH_ARGS)

.PHONY: bench-reference
bench-reference: venv ## build or reuse the Go ansible-operator and its Python for the benchmark
	$(BIN)/python -m bench.reference
