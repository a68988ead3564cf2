"""The leaderboard's pictures (bench.reporting.leaderboard_page): per modality, the frontier's
quality measure against the frontier's cost, one marker per run, the line through the runs
the table marks ◆.

Every run keeps one colour and marker shape in every picture (its place in the board's runs).
Runs whose markers would cover one another -- identical runs, or values closer than a
marker -- are drawn side by side (moved apart horizontally by whole marker widths, in points:
the values are not changed) and the caption names them. Each run's marker is an SVG group
``run-<i>`` (tests measure that none overlaps another in a browser)."""

from __future__ import annotations

from typing import Any

__all__ = ["LOG_SPAN", "MARKERS", "PICTURE", "SEPARATION", "frontier_svg", "side_by_side"]

#: the pictures' size in inches at 100 dpi (750 x 520 px; the page draws them at their own width)
PICTURE = (7.5, 5.2)
#: a cost axis turns logarithmic only when its values span more than this factor
LOG_SPAN = 50.0
MARKERS = "osD^vP*Xh<>p"
#: marker area (points²) and the distance (points) two marker centres keep at least
SIZE, SEPARATION = 60, 11.0


def _plain(ax: Any, axis: str) -> None:
    """Tick labels as plain numbers (no 2×10⁻¹, no offset), thousands separated."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}" if abs(v) >= 100 else f"{v:.4g}"))
    target.set_minor_formatter(NullFormatter())


def side_by_side(centres: list[tuple[float, float]], gap: float = SEPARATION) -> tuple[list[float], list[list[int]]]:
    """Horizontal shifts (points) that keep every two of the `centres` (points) at least `gap`
    apart, and the rows drawn side by side: markers closer than that form a row (and rows that
    then come closer than `gap` to another marker, one row) centred on its mean position."""
    n = len(centres)
    group = list(range(n))

    def find(i: int) -> int:
        while group[i] != i:
            group[i] = group[group[i]]
            i = group[i]
        return i

    def near(i: int, j: int, si: float, sj: float) -> bool:
        return abs(centres[i][0] + si - centres[j][0] - sj) < gap and abs(centres[i][1] - centres[j][1]) < gap

    for i in range(n):
        for j in range(i + 1, n):
            if near(i, j, 0.0, 0.0):
                group[find(i)] = find(j)
    shift = [0.0] * n
    rows: dict[int, list[int]] = {}
    for _ in range(n):  # a widened row can reach another marker: merge and lay out again until none is closer than gap
        rows = {}
        for i in range(n):
            rows.setdefault(find(i), []).append(i)
        for row in rows.values():
            _lay_out(row, centres, shift, gap)
        close = [(i, j) for i in range(n) for j in range(i + 1, n) if find(i) != find(j) and near(i, j, shift[i], shift[j])]
        if not close:
            break
        for i, j in close:
            group[find(i)] = find(j)
    return shift, [row for row in rows.values() if len(row) > 1]


def _lay_out(row: list[int], centres: list[tuple[float, float]], shift: list[float], gap: float) -> None:
    """Shifts placing the markers of `row` `gap` apart in x order, centred on their mean position."""
    row.sort(key=lambda i: (centres[i][0], i))
    mid = sum(centres[i][0] for i in row) / len(row)
    for j, i in enumerate(row):
        shift[i] = mid + (j - (len(row) - 1) / 2) * gap - centres[i][0]


def frontier_svg(points: list[dict[str, Any]], x_label: str, y_label: str, title: str, line: bool = True) -> tuple[str, list[list[str]]]:
    """`points` (label, x, y, frontier, index: the run's place on the board) as one picture:
    filled markers are the table's frontier runs (◆), the grey line joins them in cost order
    (`line`). Returns the SVG and the groups of labels drawn side by side."""
    from matplotlib.transforms import offset_copy

    from bench.reporting.plots import figure, svg

    fig, ax = figure(*PICTURE)
    shown = [p for p in points if p["x"] is not None and p["y"] is not None]
    front = sorted((p for p in shown if p["frontier"]), key=lambda p: (p["x"], -p["y"]))
    if line and len(front) > 1:
        ax.plot([p["x"] for p in front], [p["y"] for p in front], color="#888", linewidth=1, zorder=1, gid="frontier",
                label="the table's frontier (◆)")
    dots = []
    for p in shown:
        colour = f"C{p['index'] % 10}"
        dots.append(ax.scatter([p["x"]], [p["y"]], s=SIZE, zorder=2, marker=MARKERS[p["index"] % len(MARKERS)], gid=f"run-{p['index']}",
                               color=colour if p["frontier"] else "white", edgecolors=colour, linewidths=1.5, label=p["label"]))
    xs = [p["x"] for p in shown]
    if xs and min(xs) > 0 and max(xs) / min(xs) > LOG_SPAN:
        ax.set_xscale("log")
    _plain(ax, "x")
    _plain(ax, "y")
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title(title, fontsize=10)
    if shown:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=min(3, len(shown) + (len(front) > 1)), fontsize=8, frameon=False)
    fig.tight_layout()  # the axes' final place: marker distances are measured there
    to_points = 72.0 / fig.dpi
    centres = [tuple(float(v) * to_points for v in ax.transData.transform((p["x"], p["y"]))) for p in shown]
    shift, rows = side_by_side(centres)
    for dot, dx in zip(dots, shift, strict=True):
        if dx:
            dot.set_offset_transform(offset_copy(ax.transData, fig=fig, x=dx, y=0.0, units="points"))
    return svg(fig), [[shown[i]["label"] for i in row] for row in rows]
