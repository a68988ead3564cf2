"""The one way a number is written in a report, a page or a message (markdown, HTML, the gate's lines).

`number(x, digits)`:

* no value — ``None`` or NaN (float or numpy) — is an em dash ``—``: a metric that has no value
  here (no denominator) reads the same in every report;
* infinity is ``∞`` or ``-∞`` (never in dev.json, which is strict JSON; it can reach a page
  through a ratio);
* an integer (Python or numpy) is written whole: ``12``;
* a real number is written with `digits` decimals, ``0.4167``; from 1000 up with at most one,
  ``1234.5`` (latencies in ms, costs in units): no thousands separator, so a value can be
  copied back into a program;
* `sign=True` writes the sign of a difference always: ``+0.0120``, ``-0.0040``.

`p_value(p)` writes a p-value with four decimals, below 0.0001 as ``<0.0001``.

The machine formats — dev.json, the TREC run and qrels (bench.trec), the per-query table —
keep their full precision and are not written through here.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

__all__ = ["NO_VALUE", "number", "p_value"]

#: what a report shows for a number that has no value (None or NaN)
NO_VALUE = "—"
#: from here up a real number keeps at most one decimal
LARGE = 1000


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, Real) and not isinstance(x, Integral) and math.isnan(x))


def number(x: Any, digits: int = 4, *, sign: bool = False) -> str:
    """`x` as a report writes it (the module's rules)."""
    if _missing(x):
        return NO_VALUE
    plus = "+" if sign else ""
    if isinstance(x, bool) or not isinstance(x, Real):
        return str(x)
    if isinstance(x, Integral):
        return f"{int(x):{plus}d}"
    value = float(x)
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    places = digits if abs(value) < LARGE else min(digits, 1)
    return f"{value:{plus}.{places}f}"


def p_value(p: Any) -> str:
    """A p-value: four decimals, ``<0.0001`` below that, ``—`` for none."""
    if _missing(p):
        return NO_VALUE
    return "<0.0001" if p < 1e-4 else f"{float(p):.4f}"
