"""t5x.cpp from Python: `from t5xcpp import seqio` (docs/python.md)."""
