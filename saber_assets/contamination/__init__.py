"""Contamination: the benchmark's queries and candidates found in declared training corpora, and queries among their own candidates."""
