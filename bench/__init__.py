"""Benchmarks: each runs kvpure side by side with a labelled baseline and prints ratios."""
