# Side-by-side benchmark against the Go ansible-operator v1.42.3 (bench/, docs/benchmarks.md).
# Included by the Makefile (`include bench/bench.mk`); uses its venv, testbed-build and BIN.
#   make bench                 full run: 30-60 min on 2 cores
#   make bench-quick           small sizes: 10-15 min
#   make bench BENCH_ARGS='--scenarios latency --latency 10'
# The reference is built once into $(ANSIBLE_OPERATOR_BENCH_CACHE) (default
# ~/.cache/ansible-operator-bench) with `go install` from the Go module proxy.

BENCH_ARGS ?=

.PHONY: bench
bench: venv testbed-build ## benchmark ours vs the Go ansible-operator (30-60 min); bench/results/
	$(BIN)/python -m bench.run $(BENCH_ARGS)

.PHONY: bench-quick
bench-quick: venv testbed-build ## the same with small sizes (10-15 min)
	$(BIN)/python -m bench.run --quick $(BENCH_ARGS)

.PHONY: bench-reference
bench-reference: venv ## build or reuse the Go ansible-operator and its Python for the benchmark
	$(BIN)/python -m bench.reference
