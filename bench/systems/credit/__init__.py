"""How a system's memories are credited -- scoring rules, not launchers: the citations of a memory hit
checked against the corpus and numbered after the served atoms (provenance.py), the LLM-free rule that
decides whether a memory's text supports a cited unit (support.py), and where a memory that cites
nothing came from (attribution.py). docs/systems.md, *Memory hits* and *Attribution*."""
