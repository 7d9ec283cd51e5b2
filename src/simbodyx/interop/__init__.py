"""Bridges to other engines (optional dependencies), used by the tests and
benchmarks to compare numbers on the same model."""
