"""How a lesson's files live in notebook cells, and how they come back out as files.

A lesson file becomes a run of code cells, one per top-level block (the module's preamble,
each function or class, each run of other statements), so a learner reads and runs it piece
by piece. The first line of every such cell names the file and the piece:

    # attention.py [2/3]                 a piece of a Python file, run in the kernel
    %%writefile quiz.yml                 a whole non-Python file (IPython writes it to disk)

That line is the only link between a cell and its file: `split_module` makes the pieces when
the notebooks are built, and `files_from_history` puts the file back together from the cells
the kernel has run (the last run of each piece wins), for the hidden test cells to grade.
`files_from_notebook` does the same from a notebook file without running it, and
`fill_cells` goes the other way (files into a notebook's cells, as a learner would type them).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

__all__ = [
    "CellHeader",
    "NotebookFile",
    "files_from_history",
    "files_from_notebook",
    "fill_cells",
    "header_line",
    "parse_header",
    "split_module",
]

# A piece of a Python file; the name allows what lesson files are called (course.schema.json).
_PY_HEADER = re.compile(r"^#\s*(?P<file>[\w.\-]+\.py)\s*\[\s*(?P<part>\d+)\s*/\s*(?P<parts>\d+)\s*\]\s*$")
_WRITEFILE = re.compile(r"^%%writefile\s+(?P<file>[\w.\-]+)\s*$")
# Pieces of a Python file are joined with two blank lines, as between top-level blocks.
_JOIN = "\n\n\n"


@dataclass(frozen=True)
class CellHeader:
    file: str
    part: int  # 1-based
    parts: int

    @property
    def label(self) -> str:
        """How the learner sees this cell named: its header line without the comment sign."""
        return header_line(self.file, self.part, self.parts).lstrip("# ").replace("%%writefile ", "")


def header_line(file: str, part: int = 1, parts: int = 1) -> str:
    """The first line of a cell holding piece `part` of `parts` of `file`."""
    if file.endswith(".py"):
        return f"# {file} [{part}/{parts}]"
    return f"%%writefile {file}"


def parse_header(line: str) -> CellHeader | None:
    """The file and piece a cell's first line names; None for any other cell."""
    line = line.strip()
    match = _PY_HEADER.match(line)
    if match:
        return CellHeader(match["file"], int(match["part"]), int(match["parts"]))
    match = _WRITEFILE.match(line)
    if match:
        return CellHeader(match["file"], 1, 1)
    return None


# --- building: one file -> its pieces ------------------------------------------------------------


def split_module(text: str, filename: str, keep_together: list[tuple[int, int]] = ()) -> list[str]:
    """The pieces of a Python file, in order, without the blank lines between them.

    A piece is the module's preamble (docstring, imports, constants), a function or class with
    its decorators and the comment lines right above it, or a run of other top-level
    statements. No piece boundary falls inside a `keep_together` span (1-based first and last
    lines, e.g. the solution regions, which must stay in one cell for nbgrader).
    """
    lines = text.replace("\r\n", "\n").split("\n")
    try:
        tree = ast.parse(text, filename)
    except SyntaxError as exc:
        raise ValueError(f"{filename}:{exc.lineno}: not valid Python: {exc.msg}") from None
    starts = [0]  # 0-based first line of each piece; the first holds the module's docstring
    previous_was_block = None
    for node in tree.body:
        is_block = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        if previous_was_block is not None and (is_block or previous_was_block):
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))]) - 1
            while first - 1 > starts[-1] and lines[first - 1].lstrip().startswith("#"):
                first -= 1  # the comments right above a block belong to it
            starts.append(first)
        previous_was_block = is_block
    spans = [(first - 1, last - 1) for first, last in keep_together]
    starts = [s for s in starts if not any(begin < s <= end for begin, end in spans)]
    pieces = []
    for begin, end in zip(starts, [*starts[1:], len(lines)]):
        piece = "\n".join(lines[begin:end]).strip("\n")
        if piece.strip():
            pieces.append(piece)
    return pieces


def fill_cells(notebook, files: dict[str, str]) -> None:
    """Put `files` into a notebook's lesson cells, in place: what a learner who wrote those
    files would have typed (for tests and benchmarks that need completed notebooks).

    Only the cells a learner may edit matter to a grade (nbgrader restores the read-only ones);
    code after a file's last block goes at the end of its last cell, where a learner adds it.
    """
    for cell in notebook.cells:
        header = parse_header(cell.source.split("\n")[0]) if cell.cell_type == "code" else None
        if header is None or header.file not in files:
            continue
        if header.file.endswith(".py"):
            pieces = split_module(files[header.file], header.file)
            if len(pieces) < header.parts:
                raise ValueError(f"{header.file}: {len(pieces)} top-level pieces for {header.parts} cells")
            pieces[header.parts - 1 :] = [_JOIN.join(pieces[header.parts - 1 :])]
            body = pieces[header.part - 1]
        else:
            body = files[header.file].strip("\n")
        cell.source = header_line(header.file, header.part, header.parts) + "\n" + body


# --- grading: the kernel's history -> the files ----------------------------------------------------


@dataclass
class NotebookFile:
    """One lesson file as put back together from the cells the kernel ran."""

    name: str
    text: str
    missing: list[str] = field(default_factory=list)  # labels of pieces never run
    # (first line in `text`, 1-based; the piece's header; how many lines) for each piece.
    pieces: list[tuple[int, CellHeader, int]] = field(default_factory=list)

    def locate(self, line: int) -> tuple[CellHeader, int] | None:
        """The cell and the line in it (1-based, counting the header line) of a line of `text`."""
        for first, header, count in self.pieces:
            if first <= line < first + count:
                return header, line - first + 2
        return None


def files_from_history(history: list[str], names: list[str]) -> dict[str, NotebookFile]:
    """The files `names` as the cells in `history` (the sources the kernel ran, oldest first)
    make them; a file none of whose pieces ran is left out."""
    latest: dict[tuple[str, int], tuple[CellHeader, str]] = {}
    for source in history:
        head, _, body = source.partition("\n")
        header = parse_header(head)
        if header is not None and header.file in names:
            latest[(header.file, header.part)] = (header, body)
    files = {}
    for name in names:
        found = sorted((part, entry) for (file, part), entry in latest.items() if file == name)
        if not found:
            continue
        if not name.endswith(".py"):
            body = found[-1][1][1]
            files[name] = NotebookFile(name, body if body.endswith("\n") else body + "\n")
            continue
        parts = max(entry[0].parts for _, entry in found)
        by_part = dict(found)
        chunks, pieces, missing, line = [], [], [], 1
        for part in range(1, parts + 1):
            if part not in by_part:
                missing.append(header_line(name, part, parts).lstrip("# "))
                continue
            header, body = by_part[part]
            body = body.strip("\n")
            pieces.append((line, header, body.count("\n") + 1))
            chunks.append(body)
            line += body.count("\n") + _JOIN.count("\n")  # its lines and the blank ones after
        files[name] = NotebookFile(name, _JOIN.join(chunks) + "\n", missing, pieces)
    return files


def files_from_notebook(notebook, names: list[str]) -> dict[str, NotebookFile]:
    """The files `names` as running `notebook` from top to bottom makes them, read from its
    cells without running anything (the trusted way to get a submission's files)."""
    return files_from_history([cell.source for cell in notebook.cells if cell.cell_type == "code"], names)
