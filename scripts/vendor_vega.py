"""Build reports/templates/dvc-plots.html: DVC's plots page with Vega, Vega-Lite and vega-embed
inlined, so `dvc plots show` renders offline (.dvc/config: plots.html_template).

    mkdir /tmp/vega && cd /tmp/vega && npm pack vega vega-lite vega-embed
    python scripts/vendor_vega.py /tmp/vega

Reads the three tarballs npm pack wrote, writes the template and each package's LICENSE under
reports/templates/licenses/ (all three are BSD-3-Clause). The template keeps DVC's placeholders
``{plot_divs}`` and ``{refresh_tag}`` and drops ``{scripts}`` (the CDN script tags DVC would put there).
"""

from __future__ import annotations

import sys
import tarfile
from pathlib import Path

PACKAGES = {"vega": "build/vega.min.js", "vega-lite": "build/vega-lite.min.js", "vega-embed": "build/vega-embed.min.js"}
OUT = Path(__file__).resolve().parents[1] / "reports" / "templates"
PAGE = """<!DOCTYPE html>
<html>
<head>
{{refresh_tag}}
<meta charset="utf-8">
<title>DVC Plot</title>
<!-- Vega, Vega-Lite and vega-embed inlined for offline use ({versions}); BSD-3-Clause, licences in licenses/ beside this file.
     Built by scripts/vendor_vega.py from the npm registry's packages. -->
{scripts}
<style>table {{ border-spacing: 15px; }}</style>
</head>
<body>
{{plot_divs}}
</body>
</html>
"""


def tarball(folder: Path, name: str) -> Path:
    found = sorted(p for p in folder.glob(f"{name}-*.tgz") if p.name[len(name) + 1].isdigit())
    if len(found) != 1:
        raise SystemExit(f"error: {folder}: expected one {name}-<version>.tgz (npm pack {name}), found {len(found)}")
    return found[0]


def main(folder: Path) -> None:
    scripts, versions = [], []
    OUT.joinpath("licenses").mkdir(parents=True, exist_ok=True)
    for name, member in PACKAGES.items():
        path = tarball(folder, name)
        versions.append(path.name.removesuffix(".tgz"))
        with tarfile.open(path) as tar:
            js = tar.extractfile(f"package/{member}").read().decode("utf-8")  # type: ignore[union-attr]
            licence = tar.extractfile("package/LICENSE").read().decode("utf-8")  # type: ignore[union-attr]
        js = "\n".join(line for line in js.splitlines() if not line.startswith("//# sourceMappingURL="))  # no map to look up
        for bad in ("</script", "{plot_divs}", "{scripts}", "{refresh_tag}"):
            if bad in js:
                raise SystemExit(f"error: {path.name}: {member} holds {bad!r}: it cannot be inlined in DVC's template")
        scripts.append(f"<script>{js}</script>")
        OUT.joinpath("licenses", f"{name}.LICENSE").write_text(licence, encoding="utf-8")
    OUT.joinpath("dvc-plots.html").write_text(PAGE.format(versions=", ".join(versions), scripts="\n".join(scripts)), encoding="utf-8")
    print(f"wrote {OUT / 'dvc-plots.html'} ({', '.join(versions)})")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
