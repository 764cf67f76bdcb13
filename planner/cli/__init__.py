"""The command line: thin shells over the public API (parse, call, print)."""
