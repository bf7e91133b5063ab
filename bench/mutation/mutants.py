"""The mutants of a lesson: every edit the operators (bench/mutation/operators.py) make inside a
TODO region of a finished solution file, with a stable id.

The files are the lesson's solution folder as a learner who finished it has them: exercises/
overlaid with the marked files of solutions/, markers stripped (autograder.course.stubs). The
regions come from autograder.core.regions.parse_regions; a node is mutated only when it lies
wholly inside one region (a function that holds a region is never mutated as a whole).

A mutant id is "<lesson>:<todo>:<operator>:<n>", n counting that operator's mutants of that
TODO in source order (from 1): the same solution gives the same ids. Mutants that do not compile,
that give the original text back, or that give the same text as an earlier mutant (the
operators' order decides which name it keeps) are dropped.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import libcst as cst
from libcst.metadata import (
    ExpressionContext,
    ExpressionContextProvider,
    MetadataWrapper,
    ParentNodeProvider,
    PositionProvider,
)

from autograder.core.manifest import QUIZ_REGION, Course, Lesson
from autograder.core.regions import parse_regions, strip_markers
from autograder.course.stubs import lesson_files

from .operators import OPERATORS, Context

__all__ = ["Mutant", "generate", "in_shard", "lesson_texts", "mutants_of", "region_spans", "sample"]


@dataclass(frozen=True)
class Mutant:
    id: str  # "<lesson>:<todo>:<operator>:<n>"
    lesson: str
    todo: str
    file: str  # the file's name in the lesson folder
    operator: str
    line: int  # 1-based, in the stripped file
    before: str  # the source of the node the operator changed
    after: str  # what it became
    text: str  # the whole mutated file

    @property
    def digest(self) -> str:
        """What the mutant is, not what it is called: its file's name and text."""
        return hashlib.sha256(f"{self.file}\0{self.text}".encode()).hexdigest()[:16]


def lesson_texts(course: Course, lesson: Lesson) -> dict[str, str]:
    """{relative path: text} of the lesson's solved folder, markers stripped from the files
    that hold regions (the Python files and the quiz)."""
    out = {}
    for rel, path in lesson_files(course.root, lesson.folder).items():
        data = path.read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if rel in lesson.files or rel == lesson.quiz:
            text = strip_markers(text, rel)
        out[rel] = text
    return out


def region_spans(marked: str, filename: str) -> list[tuple[str, int, int]]:
    """(region id, first line, last line) of each region's body in the STRIPPED file (1-based,
    inclusive; an empty body gives last = first - 1). strip_markers keeps every line outside
    the regions and each region's body lines, in order; this counts them the same way."""
    spans = []
    out_lines = 0
    position = 0  # lines of the marked file consumed (0-based index of the next one)
    for region in parse_regions(marked, filename):
        out_lines += region.start_line - 1 - position
        first = out_lines + 1
        out_lines += len(region.body)
        spans.append((region.id, first, out_lines))
        position = region.end_line
    return spans


@dataclass(frozen=True)
class _Candidate:
    priority: int  # the operator's place in OPERATORS
    order: int  # the node's place in source order
    k: int  # the operator's k-th replacement of that node
    todo: str
    operator: str
    line: int
    before: str
    after: str
    text: str


def mutants_of(
    marked: str, filename: str, lesson_id: str, todos: Iterable[str] | None = None
) -> list[Mutant]:
    """The mutants of one marked solution file (regions with `### BEGIN SOLUTION id` markers),
    for the regions whose id is in `todos` (default: every region but the quiz's)."""
    text = strip_markers(marked, filename)
    wanted = None if todos is None else set(todos)
    spans = [
        (todo, first, last)
        for todo, first, last in region_spans(marked, filename)
        if todo != QUIZ_REGION and (wanted is None or todo in wanted) and last >= first
    ]
    if not spans or not filename.endswith(".py"):
        return []
    wrapper = MetadataWrapper(cst.parse_module(text))
    positions = wrapper.resolve(PositionProvider)
    parents = wrapper.resolve(ParentNodeProvider)
    contexts = wrapper.resolve(ExpressionContextProvider)
    module = wrapper.module
    ctx = Context(parents, contexts, _bound_names(module, parents, contexts))

    nodes: list[tuple[cst.CSTNode, str, int]] = []

    class _Collect(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            where = positions.get(node)
            if where is not None:
                for todo, first, last in spans:
                    if first <= where.start.line and where.end.line <= last:
                        nodes.append((node, todo, where.start.line))
                        break
            return True

    module.visit(_Collect())

    candidates: list[_Candidate] = []
    for order, (node, todo, line) in enumerate(nodes):
        for priority, operator in enumerate(OPERATORS):
            if not isinstance(node, operator.nodes):
                continue
            for k, new in enumerate(operator.mutate(node, ctx)):
                mutated = module.deep_replace(node, new).code
                candidates.append(
                    _Candidate(
                        priority,
                        order,
                        k,
                        todo,
                        operator.name,
                        line,
                        _source(module, node),
                        _source(module, new),
                        mutated,
                    )
                )

    kept: dict[int, _Candidate] = {}
    seen = {text}
    for candidate in sorted(candidates, key=lambda c: (c.priority, c.order, c.k)):
        if candidate.text in seen or not _compiles(candidate.text, filename):
            continue
        seen.add(candidate.text)
        kept[id(candidate)] = candidate

    numbers: dict[tuple[str, str], int] = {}
    out = []
    for candidate in candidates:  # source order, so that the numbers follow the file
        if id(candidate) not in kept:
            continue
        key = (candidate.todo, candidate.operator)
        numbers[key] = numbers.get(key, 0) + 1
        out.append(
            Mutant(
                id=f"{lesson_id}:{candidate.todo}:{candidate.operator}:{numbers[key]}",
                lesson=lesson_id,
                todo=candidate.todo,
                file=filename,
                operator=candidate.operator,
                line=candidate.line,
                before=candidate.before,
                after=candidate.after,
                text=candidate.text,
            )
        )
    return out


def generate(course: Course, lesson_id: str, todo: str | None = None) -> list[Mutant]:
    """Every mutant of the lesson's TODO regions (only `todo`'s when given), file by file in
    course.yml's order."""
    lesson = course.lesson(lesson_id)
    todos = [t.id for t in lesson.todos]
    if todo is not None and todo not in todos:
        raise ValueError(f"lesson {lesson_id} has no TODO {todo!r} (its TODOs: {', '.join(todos)})")
    files = lesson_files(course.root, lesson.folder)
    out: list[Mutant] = []
    for name in lesson.files:
        if name.endswith(".py") and name in files:
            marked = Path(files[name]).read_text(encoding="utf-8")
            out += mutants_of(marked, name, lesson.id, [todo] if todo else todos)
    return out


def sample(mutants: list[Mutant], k: int) -> list[Mutant]:
    """At most k mutants of each TODO, spread over its operators: one of each operator in turn
    (operators in OPERATORS' order), each operator's mutants taken in an order fixed by a hash
    of their ids (so not always the first lines of a region). The same mutants give the same
    sample; the result keeps the input's order."""
    chosen: set[str] = set()
    by_todo: dict[tuple[str, str], dict[str, list[Mutant]]] = {}
    for mutant in mutants:
        by_todo.setdefault((mutant.lesson, mutant.todo), {}).setdefault(mutant.operator, []).append(mutant)
    rank = {operator.name: index for index, operator in enumerate(OPERATORS)}
    for operators in by_todo.values():
        queues = [
            sorted(group, key=lambda m: _hash(m.id))
            for _, group in sorted(operators.items(), key=lambda item: rank.get(item[0], len(rank)))
        ]
        taken = 0
        while taken < k and any(queues):
            for queue in queues:
                if queue and taken < k:
                    chosen.add(queue.pop(0).id)
                    taken += 1
    return [m for m in mutants if m.id in chosen]


def in_shard(mutant: Mutant, index: int, count: int) -> bool:
    """Whether the mutant is in shard `index` (1..count): a hash of its id alone, so every
    machine splits the same mutants the same way."""
    return _hash(mutant.id) % count + 1 == index


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def _source(module: cst.Module, node: cst.CSTNode | cst.FlattenSentinel) -> str:
    """The code of `node` without the comment lines above a statement."""
    nodes = node.nodes if isinstance(node, cst.FlattenSentinel) else [node]
    return "\n".join(
        module.code_for_node(n.with_changes(leading_lines=[]) if hasattr(n, "leading_lines") else n).strip(
            "\n"
        )
        for n in nodes
    )


def _compiles(text: str, filename: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # `x is 0` compiles with a SyntaxWarning: still a mutant
        try:
            compile(text, filename, "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            return False
    return True


def _bound_names(module: cst.Module, parents: dict, contexts: dict):
    """A function giving, for a node, the names bound in the function around it."""
    bound: dict[cst.CSTNode, set[str]] = {}

    def function_of(node: cst.CSTNode) -> cst.FunctionDef | None:
        while node is not None and not isinstance(node, cst.FunctionDef):
            node = parents.get(node)
        return node

    class _Collect(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            params = node.params
            names = bound.setdefault(node, set())
            for param in (*params.posonly_params, *params.params, *params.kwonly_params):
                names.add(param.name.value)
            for star in (params.star_arg, params.star_kwarg):
                if isinstance(star, cst.Param):
                    names.add(star.name.value)

        def visit_Name(self, node: cst.Name) -> None:
            if contexts.get(node) is ExpressionContext.STORE:
                function = function_of(node)
                if function is not None:
                    bound.setdefault(function, set()).add(node.value)

    module.visit(_Collect())
    frozen = {function: frozenset(names) for function, names in bound.items()}

    def names_around(node: cst.CSTNode) -> frozenset[str]:
        function = function_of(node)
        return frozen.get(function, frozenset()) if function is not None else frozenset()

    return names_around
