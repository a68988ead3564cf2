"""The built-in systems (bench.systems.BUILTINS): BM25 (bm25.py), the packaged MiniLM (dense.py) and
their fusion (hybrid.py), each scoped or not. They are reached through the python adapter like any
Python system; nothing here knows gold, answers or splits."""
