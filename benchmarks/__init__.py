"""Benchmarks: measured, reported in docs/benchmarks.md, never asserted in tests."""
