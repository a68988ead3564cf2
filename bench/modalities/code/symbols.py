"""Line layout and symbol tables of one source file.

Lines: a file's text is read with universal newlines ("\\r\\n" and "\\r" become
"\\n") and split at "\\n" only, exactly as Python's tokenizer counts lines; a final
"\\n" does not open an extra line. Lines are 1-based. Char offsets are positions in
that normalised text; a line span [a, b] covers chars [start of a, end of b) without
b's newline.

Symbols: every def, async def and class of a Python file, with
  line_start  the first decorator line (or the def/class line when undecorated),
  line_end    the last line of its body (ast's end_lineno; trailing comments are not part),
  def_line    the line of the def/class keyword,
  qualname    dotted names of the enclosing defs and classes ("Class.method",
              "outer.inner"); if/try/with/for blocks are transparent,
  parent      index of the enclosing def/class in the table, -1 at module level,
  parser      "ast" or the fallback that produced it.
The parser is Python's `ast`. A file `ast` rejects (Python 2 code, a stray syntax
error) is read with `tokenize`, which is lexical and accepts Python 2 statements:
def/class starts are the first tokens of logical lines, nesting follows the
INDENT/DEDENT tokens, and a body ends at the last logical line before the next
line at the def's own depth (the same spans ast gives). If even tokenize fails,
a regex finds def/class lines and their indentation bounds the body ("regex").

Resolution of a symbol name in a file: the qualified name when it names exactly one
symbol; else, for an undotted name, the one symbol of that plain name anywhere in the
file. A qualified name defined twice (a redefinition) or a plain name carried by
several symbols is ambiguous and resolves to nothing.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings
from typing import Any

import numpy as np
import pyarrow as pa

PY_SUFFIXES = (".py", ".pyw", ".pyi")
DEF_LINE = re.compile(r"^([ \t]*)(?:async[ \t]+)?(def|class)[ \t]+([^\W\d]\w*)")
DECORATOR_LINE = re.compile(r"^([ \t]*)@")


def normalise(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def is_python(path: str) -> bool:
    return path.endswith(PY_SUFFIXES)


def split_lines(text: str) -> list[str]:
    if not text:
        return []
    lines = text.split("\n")
    return lines[:-1] if text.endswith("\n") else lines


def line_offsets(text: str) -> tuple[np.ndarray, np.ndarray]:
    """Char start and end (newline excluded) of every line of `split_lines`, from the
    newlines' positions (one code point per UTF-32 unit: the text is never split)."""
    if not text:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    newlines = np.flatnonzero(np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32) == 10)
    ends = newlines if text.endswith("\n") else np.append(newlines, len(text))
    starts = np.concatenate(([0], newlines[: len(ends) - 1] + 1))
    return starts.astype(np.int64), ends.astype(np.int64)


def line_char_spans(texts: Any, row: np.ndarray, first: np.ndarray, last: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each (row, first, last): the char start of line `first` and the char end (newline
    excluded) of line `last` of ``texts[row]`` (1-based lines within the text, as
    :func:`line_offsets` gives them), for all texts at once from their UTF-8 bytes: a code
    point starts at every byte that is not a continuation byte."""
    arr = pa.array(texts, type=pa.large_string(), from_pandas=True)
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset: arr.offset + len(arr) + 1]
    data = arr.buffers()[2]
    data = np.frombuffer(data, dtype=np.uint8)[offsets[0]: offsets[-1]] if data is not None else np.zeros(0, np.uint8)
    offsets = offsets - offsets[0]
    if len(data) and int(data.max()) >= 0x80:
        before = np.concatenate(([0], np.cumsum((data & 0xC0) != 0x80)))  # code points before each byte
    else:  # ASCII only: a byte is a code point (no running count over every byte)
        before = None
    newline = np.flatnonzero(data == 10)
    text_start = offsets[:-1] if before is None else before[offsets[:-1]]
    text_len = (offsets[1:] if before is None else before[offsets[1:]]) - text_start
    text_of = np.searchsorted(offsets, newline, side="right") - 1
    at = (newline if before is None else before[newline]) - text_start[text_of]  # each newline's position in its text
    count = np.bincount(text_of, minlength=len(arr))
    base = np.concatenate(([0], np.cumsum(count)[:-1]))
    row, first, last = (np.asarray(v, dtype=np.int64) for v in (row, first, last))
    start = np.where(first > 1, at[np.clip(base[row] + first - 2, 0, max(len(at) - 1, 0))] + 1 if len(at) else 0, 0)
    inside = last - 1 < count[row]
    end = np.where(inside, at[np.clip(base[row] + last - 1, 0, max(len(at) - 1, 0))] if len(at) else 0, text_len[row])
    return start.astype(np.int64), end.astype(np.int64)


def parse_symbols(text: str, path: str = "x.py") -> tuple[list[dict[str, Any]], str]:
    """Symbol table of a file and the parser used ("ast", "tokenize", "regex"; "none" if not Python)."""
    if not is_python(path):
        return [], "none"
    try:
        return _ast_symbols(quiet_parse(text)), "ast"
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    try:
        return _token_symbols(text), "tokenize"
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return _regex_symbols(text), "regex"


def quiet_parse(text: str) -> ast.Module:
    """ast.parse without the invalid-escape warnings old code raises."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text)


def _record(out: list[dict], name: str, kind: str, start: int, def_line: int, end: int, parent: int, parser: str) -> int:
    qual = f"{out[parent]['qualname']}.{name}" if parent >= 0 else name
    out.append({"qualname": qual, "name": name, "kind": kind, "line_start": start, "line_end": end,
                "def_line": def_line, "parent": parent, "parser": parser})
    return len(out) - 1


def _ast_symbols(tree: ast.AST) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def visit(node: ast.AST, parent: int) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                start = min([d.lineno for d in child.decorator_list] + [child.lineno])
                kind = "class" if isinstance(child, ast.ClassDef) else "function"
                idx = _record(out, child.name, kind, start, child.lineno, child.end_lineno or child.lineno, parent, "ast")
                visit(child, idx)
            else:
                visit(child, parent)

    visit(tree, -1)
    return out


def _logical_lines(text: str) -> list[tuple[str, Any]]:
    """Events of the token stream: ("indent",), ("dedent",), ("line", tokens, first_row, last_row)."""
    events: list[tuple[str, Any]] = []
    current: list[tokenize.TokenInfo] = []
    skip = {tokenize.NL, tokenize.COMMENT, tokenize.ENCODING}
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in skip:
            continue
        if tok.type == tokenize.INDENT:
            events.append(("indent", None))
        elif tok.type == tokenize.DEDENT:
            events.append(("dedent", None))
        elif tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
            if current:
                events.append(("line", (current, current[0].start[0], tok.start[0] if tok.type == tokenize.NEWLINE else current[-1].end[0])))
                current = []
        else:
            current.append(tok)
    return events


def _token_symbols(text: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    open_syms: list[tuple[int, int]] = []  # (index, depth of the def line)
    depth = 0
    last_end = 0
    decorator_start: int | None = None

    def close_to(level: int) -> None:
        while open_syms and open_syms[-1][1] >= level:
            out[open_syms.pop()[0]]["line_end"] = last_end

    for kind, payload in _logical_lines(text):
        if kind == "indent":
            depth += 1
            continue
        if kind == "dedent":
            depth -= 1
            continue
        toks, first_row, last_row = payload
        close_to(depth)
        words = [t.string for t in toks[:3]]
        if words[0] == "@":
            decorator_start = first_row if decorator_start is None else decorator_start
            last_end = last_row
            continue
        if words[0] == "async" and len(words) > 1:
            words = words[1:]
        if words[0] in ("def", "class") and len(words) > 1 and words[1].isidentifier():
            parent = open_syms[-1][0] if open_syms else -1
            start = decorator_start if decorator_start is not None else first_row
            idx = _record(out, words[1], "class" if words[0] == "class" else "function", start, first_row, last_row, parent, "tokenize")
            if toks[-1].string == ":":  # a block header: the body follows on indented lines
                open_syms.append((idx, depth))
        decorator_start = None
        last_end = last_row
    close_to(-1)
    return out


def _indent(line: str) -> int:
    return len(line.expandtabs(8)) - len(line.expandtabs(8).lstrip())


def _regex_symbols(text: str) -> list[dict[str, Any]]:
    lines = split_lines(text)
    out: list[dict[str, Any]] = []
    stack: list[tuple[int, int]] = []  # (index, indent)
    for i, line in enumerate(lines):
        m = DEF_LINE.match(line)
        if not m:
            continue
        ind = _indent(line)
        end = i
        for j in range(i + 1, len(lines)):
            body = lines[j].strip()
            if not body or body.startswith("#"):
                continue
            if _indent(lines[j]) <= ind:
                break
            end = j
        start = i
        while start > 0 and DECORATOR_LINE.match(lines[start - 1]) and _indent(lines[start - 1]) == ind:
            start -= 1
        while stack and (stack[-1][1] >= ind or out[stack[-1][0]]["line_end"] < i + 1):
            stack.pop()
        parent = stack[-1][0] if stack else -1
        idx = _record(out, m.group(3), "class" if m.group(2) == "class" else "function", start + 1, i + 1, end + 1, parent, "regex")
        stack.append((idx, ind))
    return out


def resolve(symbols: list[dict[str, Any]], name: str) -> tuple[dict[str, Any] | None, str | None]:
    """The one symbol `name` denotes, or a one-line problem (missing / ambiguous)."""
    exact = [s for s in symbols if s["qualname"] == name]
    if len(exact) == 1:
        return exact[0], None
    if len(exact) > 1:
        lines = ", ".join(str(s["def_line"]) for s in exact)
        return None, f"symbol {name!r} is ambiguous: defined {len(exact)} times (lines {lines}); use a line region"
    if "." not in name:
        plain = [s for s in symbols if s["name"] == name]
        if len(plain) == 1:
            return plain[0], None
        if len(plain) > 1:
            quals = ", ".join(f"{s['qualname']}@{s['def_line']}" for s in plain)
            return None, f"symbol {name!r} is ambiguous: {len(plain)} symbols of that name ({quals}); qualify it"
    return None, f"symbol {name!r} not found"


def innermost(symbols: list[dict[str, Any]], line: int) -> dict[str, Any] | None:
    """The innermost symbol whose span holds `line` (None at module level)."""
    best = None
    for s in symbols:
        if s["line_start"] <= line <= s["line_end"]:
            if best is None or (s["line_end"] - s["line_start"]) <= (best["line_end"] - best["line_start"]):
                best = s
    return best
