"""Benchmarks of statecore on a real Temporal dev server (see bench/README.md)."""
