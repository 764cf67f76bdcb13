"""Model architectures: the parsed description, parameter counts, HF config.json parsing, the catalog."""
