"""Helpers the benchmarks share: measurement, statistics, plots, processes, models."""
