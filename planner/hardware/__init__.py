"""Accelerators: the catalog (one JSON data file, each figure with its source) and its loader."""
