"""When the learner's code runs out of time: where it was, and what that costs the rest of the lesson.

A check whose budget runs out has its worker's Python stack sampled before the worker is killed
(Sandbox.sample_stack: faulthandler in the worker). Here that sample becomes a place in the
learner's own files, "attention.py:88, en forward, dentro de TODO [mask]" (never a temporary path,
never a frame of the engine, a library or a reference piece), said in the check's message and
recorded as the check's `raised_in`, so the next step and the grouping of checks by cause point at
it. The sample is advisory: it names a place, it never awards or takes a point.

What a hang costs the lesson's other checks depends on who grades:

- learner-side (`check`, `watch`, `hint`: POLICY_LEARNER): the lesson's code that hung is held
  back (Sandbox.hold). Every later check that would run it fails at once "en espera de la misma
  causa"; a check that runs none of it (a quiz answer) still runs. One timeout per lesson.
- official (`grade`, `grade-all`, the service: POLICY_OFFICIAL, the default): every later check
  gets a short first budget (SHORT_BUDGET_S). When it runs out, the stack is sampled again: at the
  same place (file, function and TODO) the check is stopped there, failing for the same cause;
  anywhere else it gets the rest of its own budget. A loop that only some inputs reach costs only
  the checks that reach it, and a check that is merely slow loses nothing.

Informational checks (course.yml `informational: true`, 0 points) get at most
INFORMATIONAL_BUDGET_S in either policy: they never count, so they never cost a minute.

The policy is a parameter of grading.grade, given by the command that grades: nothing a learner
sets (an environment variable, a file) changes how an official grade is made.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from autograder.core.manifest import CheckSpec, Lesson
from autograder.core.results import Block, CheckResult, Feedback, RaisedIn, Status, Text, message
from autograder.engine import blame
from autograder.sandbox.client import HeldBack, Sandbox

POLICY_LEARNER = "learner"
POLICY_OFFICIAL = "official"
POLICIES = (POLICY_LEARNER, POLICY_OFFICIAL)

# CPU seconds: every check of the course's solutions takes under 0.5 s here; a learner's slower
# machine gets several times that before its stack is even looked at. A check's short budget is
# the smaller of SHORT_BUDGET_S and SHORT_FRACTION of its own.
SHORT_BUDGET_S = 3.0
SHORT_FRACTION = 0.25
INFORMATIONAL_BUDGET_S = 5.0
MAX_SHOWN_FRAMES = 6  # the learner's own frames shown under the message, innermost last


def short_budget(timeout: float) -> float:
    """The first budget of a check graded officially after its lesson's first hang."""
    return min(SHORT_BUDGET_S, SHORT_FRACTION * timeout)


@dataclass(frozen=True)
class Place:
    """Where the learner's code was: a file of theirs (its name in the lesson's folder), the
    line, the function, and the TODO region holding that line (None: given code, or another
    lesson's file). `calls`: the learner's frames leading there, outermost first, as
    (file, line, function)."""

    file: str
    line: int
    function: str
    todo: str | None
    calls: tuple[tuple[str, int, str], ...] = ()

    def same_code(self, other: "Place | None") -> bool:
        """The same loop, as far as two samples can tell: same file, function and TODO (a
        loop's body spans lines, and two samples land on any of them)."""
        return other is not None and (self.file, self.function, self.todo) == (
            other.file,
            other.function,
            other.todo,
        )

    @property
    def raised_in(self) -> RaisedIn | None:
        return RaisedIn(self.todo, self.file, self.line) if self.todo is not None else None


def locate(
    frames: Iterable[dict], root: Path | str, names: Iterable[str], todos: Iterable[str], stubs: Path | None
) -> Place | None:
    """The innermost of `frames` (a stack sample, innermost first) in one of the learner's files
    `names` under `root`; None when no frame is theirs. `todos`: the TODO ids whose regions may
    hold the line, judged against the untouched stubs in `stubs` (engine/blame.py)."""
    root, names, todos = str(root).rstrip("/") + "/", set(names), set(todos)
    mine = []
    for frame in frames:
        filename = str(frame.get("filename", ""))
        if not filename.startswith(root):
            continue
        name = filename[len(root) :]
        if name in names:
            mine.append((name, int(frame.get("lineno") or 0), str(frame.get("name", "?"))[:80]))
    if not mine:
        return None
    name, line, function = mine[0]
    todo = None
    text = blame.read_text(Path(root) / name)
    if text is not None and todos:
        stub = blame.read_text(stubs / name) if stubs is not None else None
        todo = blame.todo_at(text, line, stub, todos)
    return Place(name, line, function, todo, tuple(reversed(mine[:MAX_SHOWN_FRAMES])))


def place_parts(place: Place) -> tuple:
    """The message naming where the code was, and the learner's frames that led there."""
    where = f"{place.file}:{place.line}"
    if place.todo is not None:
        text = message("hang.stopped_in_todo", where=where, function=place.function, todo=place.todo)
    else:
        text = message("hang.stopped_at", where=where, function=place.function)
    if len(place.calls) < 2:
        return (text,)
    block = "\n".join(f"{file}:{line}  {function}()" for file, line, function in place.calls)
    return (text, Block(block, kind="traceback"))


@dataclass
class Hang:
    """The first check of a lesson that ran out of time, and where the learner's code was."""

    check: str
    place: Place | None


class LessonHangs:
    """One lesson's grading as far as hangs go: the budget each check starts with, what a check
    that ran out of time says, and (learner-side) the code held back after the first hang.
    `names(box)`: the learner's own files in a sandbox (the reference pieces beside them are not
    theirs)."""

    def __init__(self, lesson: Lesson, policy: str, stubs: Path | None, names) -> None:
        if policy not in POLICIES:
            raise ValueError(f"hang policy must be one of {POLICIES}, not {policy!r}")
        self.lesson, self.policy, self.stubs, self.names = lesson, policy, stubs, names
        self.todos = [todo.id for todo in lesson.todos]
        self.hang: Hang | None = None

    # ------------------------------------------------------------ before a check
    def affects(self, box: Sandbox) -> bool:
        """Whether the hang's code is in this sandbox (always, when its place is unknown)."""
        hang = self.hang
        return hang is not None and (hang.place is None or hang.place.file in self.names(box))

    def prepare(self, box: Sandbox) -> None:
        """Learner-side, after a hang: hold back, in a sandbox that holds the code that hung,
        the module it is in and every module that imports it (all of them, when the place is
        unknown); a check that imports none of them (another file of the lesson, a quiz) runs."""
        box.stopped = None  # a new check: whatever stopped the last one is said already
        if self.policy != POLICY_LEARNER or box.held is not None or not self.affects(box):
            return
        place = self.hang.place
        modules = None if place is None else importers(box.root, Path(place.file).stem)
        box.hold(self.waiting_feedback(), modules)

    def begin(self, spec: CheckSpec, box: Sandbox) -> None:
        """Start `spec`'s budget on `box` (Sandbox.begin_check)."""
        if spec.informational:
            box.begin_check(min(spec.timeout, INFORMATIONAL_BUDGET_S))
            return
        hang = self.hang
        if self.policy != POLICY_OFFICIAL or hang is None or hang.place is None or not self.affects(box):
            box.begin_check(spec.timeout)
            return

        def keep_going(frames: list[dict]) -> bool:
            return not hang.place.same_code(self.locate(frames, box))

        box.begin_check(spec.timeout, first=short_budget(spec.timeout), keep_going=keep_going)

    # ------------------------------------------------------------ after a check
    def locate(self, frames: Iterable[dict], box: Sandbox) -> Place | None:
        return locate(frames, box.root, self.names(box), self.todos, self.stubs)

    def after(self, spec: CheckSpec, result: CheckResult, exc: BaseException | None, boxes) -> None:
        """Say where a check that ran out of time was (in `result`, in place), remember the
        lesson's first hang, and mark the checks held back because of it."""
        if isinstance(exc, HeldBack):
            self._blame(spec, result)
            return
        stopped = next(((box, box.stopped) for box in boxes if box.stopped is not None), None)
        for box in boxes:
            box.stopped = None  # said once: never again by a later check's setup error
        if stopped is None or result.status is not Status.ERROR:
            return  # no timeout, or a grader that caught it and judged anyway
        box, info = stopped
        first = self.hang is None
        # Stopped at its short budget: in the code that hung, by definition; said with the
        # first sample's place, so the checks of one cause read (and group) as one.
        place = self.hang.place if info.short and not first else self.locate(info.frames, box)
        if first:
            self.hang = Hang(spec.id, place)
        parts: list = list(place_parts(place)) if place is not None else []
        if info.short and not first:
            seconds = f"{short_budget(spec.timeout):g}"
            parts.append(message("hang.same_place", check=self.hang.check, seconds=seconds))
        elif spec.informational:
            parts.extend(_timeout_parts(result.feedback))
            parts.append(message("hang.informational_budget", seconds=f"{INFORMATIONAL_BUDGET_S:g}"))
        else:
            parts.extend(_timeout_parts(result.feedback))
        result.feedback = Feedback(tuple(parts))
        self._blame(spec, result, place)
        if first and self.policy == POLICY_LEARNER:
            for other in boxes:
                self.prepare(other)

    def _blame(self, spec: CheckSpec, result: CheckResult, place: Place | None = None) -> None:
        place = place if place is not None else (self.hang.place if self.hang else None)
        raised = place.raised_in if place is not None else None
        result.raised_in = raised
        if raised is not None and raised.todo != spec.todo:
            result.waits_on = raised.todo

    def waiting_feedback(self) -> Feedback:
        """What a check held back says: where the code was, and which check ran out of time."""
        hang = self.hang
        parts = list(place_parts(hang.place)) if hang.place is not None else []
        parts.append(message("hang.waiting", check=hang.check))
        return Feedback(tuple(parts))


MAX_SCANNED_FILES = 200
MAX_SCANNED_BYTES = 1 << 20


def importers(root: Path, module: str) -> set[str]:
    """`module` and the modules of the folder `root` that import it, directly or through each
    other, read from their source (never run): `import attention`, `from attention import ...`.
    A file that does not parse imports nothing (importing it fails on its own)."""
    imports: dict[str, set[str]] = {}
    for path in sorted(Path(root).glob("*.py"))[:MAX_SCANNED_FILES]:
        try:
            if path.is_symlink() or path.stat().st_size > MAX_SCANNED_BYTES:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (OSError, SyntaxError, ValueError):
            continue
        names = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
        imports[path.stem] = names
    held = {module}
    while True:
        more = {name for name, used in imports.items() if name not in held and used & held}
        if not more:
            return held
        held |= more


def _timeout_parts(feedback: Feedback) -> tuple:
    """The engine's own timeout message, without what the sample now says better."""
    return tuple(
        p for p in feedback.parts if not (isinstance(p, Text) and p.key == "engine.worker_interrupted")
    )
