"""The grading engine: runs a lesson's hidden graders (pytest, in this trusted process)
against a submission served by a sandboxed worker, and turns pytest's outcomes into results.

The graders never import the learner's code; each check talks to it through the `submission`
fixture. A check's TODO, points and timeout come from course.yml; pytest-timeout enforces the
timeout, and the sandbox kills the worker of an interrupted check so the next one starts clean.

A lesson that `uses` earlier lessons (course.yml) imports their files: its worker's folder holds
the REFERENCE files of those lessons (made from the course's marked solutions by
engine/references.py) next to the learner's, so a mistake in lesson 03 never fails lesson 04.
The `own_submission` fixture serves the learner's OWN files of those lessons instead, for the
informational check that says whether their pieces fit together.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import random
import signal
import zlib
from pathlib import Path
from typing import Iterable, Sequence

import pytest

from autograder.core.manifest import Course, Lesson
from autograder.core.results import (
    CheckResult,
    CourseResult,
    Feedback,
    LessonResult,
    RaisedIn,
    Status,
    Text,
    combine_isolation,
    message,
)
from autograder.engine import blame, references
from autograder.engine.checks import CheckFailure, describe_student_error
from autograder.engine.practice import grade_practice, has_practice_tests
from autograder.sandbox import cpu_clock
from autograder.sandbox.client import Limits, Sandbox, StudentError, WorkerDied
from autograder.sandbox.intake import contained, refused

GRADERS_ROOT = Path(__file__).resolve().parents[1] / "graders"
_CHECK_KEY = pytest.StashKey[str]()


def graders_root() -> Path:
    """Where the hidden graders live: $AUTOGRADER_GRADERS, else the package's own folder."""
    return Path(os.environ.get("AUTOGRADER_GRADERS") or GRADERS_ROOT)


def solutions_dir(course: Course) -> Path | None:
    """The course's marked solutions, which references and stubs are made from (see
    engine/references.py); None in a learner's release."""
    return references.solutions_dir(course, graders_root())


def reference_files(course: Course, lesson: Lesson) -> dict[str, Path]:
    """The reference files of the lessons `lesson` uses: {file name: path}."""
    return references.reference_files(course, lesson, solutions_dir(course))


def own_files(
    course: Course, lesson: Lesson, lesson_dir: Path, *, boundary: Path | None = None
) -> dict[str, Path] | None:
    """The learner's own files of the lessons `lesson` uses, found beside its folder (as in the
    repository: exercises/03-.../ next to exercises/04-.../); None when any is missing, or is a
    symlink or below one under `boundary`. By default that is the folder around `lesson_dir`:
    it was checked as the lesson's folder was, or is the one the user chose to grade."""
    lesson_dir = Path(lesson_dir)
    boundary = lesson_dir.parent if boundary is None else Path(boundary)
    files = {}
    for used in (course.lesson(u) for u in lesson.uses):
        for name in used.files:
            path = lesson_dir.parent / used.folder / name
            if not (contained(boundary, path) and path.is_file()):
                return None
            files[name] = path
    return files


def lesson_submission_dir(
    course: Course, lesson: Lesson, submission: Path | None, single: bool, *, boundary: Path | None = None
) -> Path:
    """The folder holding `lesson`'s files for this grading run (see `autograder grade --help`).
    A folder that is a symlink, or below one, under `boundary` (default: `submission`, else the
    course's root) is never followed: it becomes a path that does not exist (missing files)."""
    if boundary is None:
        boundary = course.root if submission is None else Path(submission)
    folder = _lesson_dir(course, lesson, submission, single)
    return folder if contained(boundary, folder) else refused(folder)


def _lesson_dir(course: Course, lesson: Lesson, submission: Path | None, single: bool) -> Path:
    if submission is None:
        return course.root / "exercises" / lesson.folder
    submission = Path(submission)
    if single and not (submission / lesson.files[0]).exists() and (submission / lesson.folder).is_dir():
        return submission / lesson.folder  # a root was given for one lesson: be forgiving
    return submission if single else submission / lesson.folder


def grade(
    course: Course,
    lessons: Iterable[Lesson],
    submission: Path | None = None,
    *,
    lang: str | None = None,
    seed: int | None = None,
    limits: Limits = Limits(),
    on_lesson=None,
    boundary: Path | None = None,
    first: dict[str, Sequence[str]] | None = None,
    on_start=None,
    on_check=None,
    on_worker=None,
    take=None,
) -> CourseResult:
    """Grade `lessons` of `submission` (default: the course's own exercises/). `boundary`: the
    folder below which nothing of the learner's is followed if it is a symlink (default: see
    `lesson_submission_dir` and `own_files`); grade-all gives the learner's whole folder.

    For a caller that shows results while grading (`autograder watch`): `first` maps a lesson id
    to check ids that run before the lesson's other checks; `on_start(lesson, check_id)` is
    called as each check starts (grade-all names the check a learner's time limit stopped);
    `on_check(lesson, check)` gets each check's result as soon as the check is over, in the
    order they ran; `on_worker(lesson, pid)` the pid of each worker started to run the learner's
    code. None of them changes a result.

    `take`: for engine/split.py, a function giving the index (in `lessons`) of the next lesson
    to grade, None when there is none left; only those lessons are graded, in that order.
    Folders are resolved from the whole list either way, so a lesson is graded the same in
    whichever process takes it."""
    lessons = list(lessons)
    lang = lang or course.language
    references.use(course, solutions_dir(course))  # for graders that compute with the reference pieces
    seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
    single = len(lessons) == 1
    # Start every worker first: their torch imports overlap ours and each other's.
    folders = [
        lesson_submission_dir(course, lesson, submission, single, boundary=boundary) for lesson in lessons
    ]
    # The learner's own files of the lessons each one uses (None where one is missing).
    own = [own_files(course, lesson, folder, boundary=boundary) for lesson, folder in zip(lessons, folders)]
    # Each lesson's sandbox (a copy of its files, with reference pieces beside them) exists only
    # from shortly before its grading until right after it: no other lesson's worker ever
    # shares the machine with it longer than needed.
    sandboxes: dict[int, Sandbox] = {}

    def sandbox_for(index: int) -> Sandbox:
        if index not in sandboxes:
            lesson = lessons[index]
            sandboxes[index] = Sandbox(
                folders[index], limits, provided=_provided_files(course, lesson, own[index])
            )
        return sandboxes[index]

    results = []
    try:
        if take is None:  # the order is known: each lesson's worker starts while the one before is graded
            for index in range(min(2, len(lessons))):
                sandbox_for(index).start()
        for index in range(len(lessons)) if take is None else iter(take, None):
            lesson, mine = lessons[index], own[index]
            if take is None and index + 1 < len(lessons):
                sandbox_for(index + 1).start()
            sandbox = sandbox_for(index)
            result = grade_lesson(
                lesson,
                sandbox,
                seed,
                own=mine,
                stubs=stub_folder(course, lesson, folders[index]),
                first=(first or {}).get(lesson.id, ()),
                **{
                    name: functools.partial(callback, lesson)
                    for name, callback in (
                        ("on_start", on_start),
                        ("on_check", on_check),
                        ("on_worker", on_worker),
                    )
                    if callback is not None
                },
            )
            sandboxes.pop(index).close()
            results.append(result)
            if on_lesson is not None:
                on_lesson(result)
    finally:
        for sandbox in sandboxes.values():
            sandbox.close()
    return CourseResult(course=course.name, language=lang, seed=seed, lessons=results)


def _provided_files(course: Course, lesson: Lesson, own: dict[str, Path] | None) -> dict[str, Path]:
    """What joins the learner's files in the worker's folder: the reference files of the
    lessons this one uses or, in a student release without hidden graders (practice mode), the
    learner's `own`, which are all there is."""
    if not lesson.uses:
        return {}
    if (graders_root() / lesson.graders).is_dir():
        return reference_files(course, lesson)
    return own or {}


def stub_folder(course: Course, lesson: Lesson, submission: Path) -> Path | None:
    """Where the lesson's untouched stubs are, for autograder/engine/blame.py: made from the
    solutions, else the course's exercises/ when it is not the folder being graded (a learner's
    repository holds their own code there); None when neither exists."""
    return references.stub_folder(course, lesson, submission, solutions_dir(course))


def grade_lesson(
    lesson: Lesson,
    sandbox: Sandbox,
    seed: int,
    *,
    own: dict[str, Path] | None = None,
    stubs: Path | None = None,
    first: Sequence[str] = (),
    on_start=None,
    on_check=None,
    on_worker=None,
) -> LessonResult:
    """Grade one lesson in `sandbox`; `own` are the learner's own files of the lessons it uses
    (for the `own_submission` fixture), None when they are not there; `stubs` the folder of the
    lesson's untouched stubs (to tell which TODO a line that raised belongs to). `first`,
    `on_start(check_id)`, `on_check(check)` and `on_worker(pid)`: as in `grade`."""
    plugin = GradingPlugin(lesson, sandbox, seed, own)
    plugin.stubs = stubs
    plugin.first, plugin.on_start, plugin.on_check, plugin.on_worker = (
        tuple(first),
        on_start,
        on_check,
        on_worker,
    )
    folder = graders_root() / lesson.graders
    if not folder.is_dir() and has_practice_tests(sandbox.submission):
        # A student release graded without the instructor's hidden graders: say so, and grade
        # with what the learner has, rather than giving nothing.
        return grade_practice(lesson, sandbox)
    missing = sandbox.provided_missing
    if not folder.is_dir():
        error = Feedback.of(message("engine.graders_missing", lesson=lesson.id, folder=str(folder)))
        plugin.internal_error = error
    elif missing:
        # Hidden graders without the reference pieces they grade against: an instructor's
        # setup problem (run `autograder stubs`), never a learner's mistake.
        plugin.internal_error = Feedback.of(
            message("engine.reference_missing", lesson=lesson.id, files=", ".join(missing))
        )
    else:
        try:
            _run_pytest(folder, plugin)
        finally:
            plugin.close()
        if plugin.callback_error is not None:
            raise plugin.callback_error
    checks = [
        plugin.records.get(spec.id)
        or CheckResult(
            spec.id,
            spec.todo,
            Status.ERROR,
            0.0,
            float(spec.points),
            plugin.internal_error or Feedback.of(message("engine.check_missing", check=spec.id)),
        )
        for spec in lesson.checks
    ]
    for spec, check in zip(lesson.checks, checks):
        check.informational = spec.informational
    result = LessonResult(lesson.id, lesson.slug, dict(lesson.title), lesson.xp, checks)
    result.isolation = combine_isolation([box.isolation for box in plugin.sandboxes()])
    return result


def _run_pytest(folder: Path, plugin: "GradingPlugin") -> None:
    has_alarm = hasattr(signal, "SIGALRM")
    args = [
        str(folder),
        "-c",
        str(GRADERS_ROOT / "pytest.ini"),
        "--rootdir",
        str(folder),
        "--confcutdir",
        str(folder),
        "--import-mode=importlib",
        "-q",
        "-s",
        "-p",
        "no:cacheprovider",
        # Its gc.collect() after every test costs ~0.1 s with torch loaded, and an unraisable
        # exception in a grader is not a learner's failure.
        "-p",
        "no:unraisableexception",
        "-p",
        "pytest_timeout" if has_alarm else "no:timeout",
        "-o",
        "timeout_method=signal",
    ]
    previous = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # only the plugins we name
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            code = pytest.main(args, plugins=[plugin])
    finally:
        if previous is None:
            os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
        else:
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = previous
    if plugin.interrupted:
        raise KeyboardInterrupt  # pytest swallowed the learner's Ctrl-C; the CLI reports it
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) and not plugin.records:
        plugin.internal_error = Feedback.of(message("engine.graders_broken", detail=sink.getvalue()[-1500:]))


def _one_torch_thread() -> None:
    """The graders' references work on tensors of a few hundred numbers: torch's intra-op thread
    pool only adds hand-offs, which on a busy machine (the worker on the other core, a cohort
    graded two at a time) cost milliseconds per call, ~0.6 s for lesson 03's softmaxes alone."""
    import sys

    torch = sys.modules.get("torch")  # imported by the graders' modules, never by us
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)


class GradingPlugin:
    """pytest plugin: provides the graders' fixtures and records each check's outcome."""

    def __init__(
        self, lesson: Lesson, sandbox: Sandbox, seed: int, own: dict[str, Path] | None = None
    ) -> None:
        self.lesson, self.sandbox, self.seed = lesson, sandbox, seed
        self.own, self._own_sandbox = own, None
        self.records: dict[str, CheckResult] = {}
        self.internal_error: Feedback | None = None
        self._todo_titles = {todo.id: dict(todo.title) for todo in lesson.todos}
        self.interrupted = False
        self.stubs: Path | None = None
        # For a caller that shows results while grading (see `grade`).
        self.first: tuple[str, ...] = ()
        self.on_start = self.on_check = self.on_worker = None
        self.callback_error: Exception | None = None
        self._left: dict[str, int] = {}  # tests of each check not over yet
        self._workers: set[int] = set()

    def pytest_keyboard_interrupt(self, excinfo) -> None:
        # pytest also calls this for its own Interrupted (e.g. a collection error): only a
        # real Ctrl-C stops the whole grading run.
        self.interrupted = excinfo.errisinstance(KeyboardInterrupt)

    # ---------------------------------------------------------------- collection
    def pytest_configure(self, config: pytest.Config) -> None:
        config.addinivalue_line("markers", "check(id): the course.yml check this test implements")

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        _one_torch_thread()
        known = {spec.id: spec for spec in self.lesson.checks}
        for item in items:
            marker = item.get_closest_marker("check")
            check_id = marker.args[0] if marker and marker.args else None
            if check_id not in known:
                raise pytest.UsageError(
                    f"{item.nodeid}: grader test without a course.yml check (marker check({check_id!r}))"
                )
            item.stash[_CHECK_KEY] = check_id
            # pytest-timeout is the wall-clock bound; the budget itself is the worker's CPU time
            # where it can be measured (Sandbox.begin_check, autograder/sandbox/cpu_clock.py).
            item.add_marker(pytest.mark.timeout(cpu_clock.wall_bound(known[check_id].timeout)))
            self._left[check_id] = self._left.get(check_id, 0) + 1
        if self.first:
            # The checks asked for first keep their own order among themselves (sort is stable).
            rank = {check_id: n for n, check_id in enumerate(self.first)}
            items[:] = sorted(items, key=lambda item: rank.get(item.stash[_CHECK_KEY], len(rank)))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # A check's result is ours (pytest_runtest_makereport below); pytest's own report of a
        # failure, which parses the source of every frame, cost ~0.1 s per failed check and was
        # never shown. Collection errors, reported before this, keep their traceback.
        session.config.option.tbstyle = "no"

    # ---------------------------------------------------------------- fixtures
    def _ready(self, box: Sandbox) -> Sandbox:
        # Starting a worker is not part of a check's time (timeout_func_only = true); a worker
        # an earlier check killed is replaced.
        box.deadline = None
        try:
            box.ensure_ready()
        except WorkerDied:
            box.kill()
            box.ensure_ready()
        self._saw_worker(box)
        return box

    def _saw_worker(self, box: Sandbox) -> None:
        pid = box.worker_pid
        if pid is not None and pid not in self._workers:
            self._workers.add(pid)
            self._call_back(self.on_worker, pid)

    def _call_back(self, callback, value) -> None:
        """A caller's callback must not break pytest's run (its error would be an internal
        error and cost the remaining checks): the first error stops the callbacks and is raised
        once the lesson is graded."""
        if callback is None or self.callback_error is not None:
            return
        try:
            callback(value)
        except Exception as exc:  # noqa: BLE001 - re-raised by grade_lesson
            self.callback_error = exc

    @pytest.fixture
    def submission(self, request: pytest.FixtureRequest) -> Sandbox:
        return self._ready(self.sandbox)

    @pytest.fixture
    def own_submission(self, request: pytest.FixtureRequest) -> Sandbox:
        """The learner's files of this lesson with THEIR OWN files of the lessons it uses (not
        the reference ones): for the informational check of how their pieces fit together."""
        if self.own is None:
            pytest.skip("engine.own_pieces_missing")
        if self._own_sandbox is None:
            self._own_sandbox = Sandbox(self.sandbox.submission, self.sandbox.limits, provided=self.own)
        return self._ready(self._own_sandbox)

    def sandboxes(self) -> list[Sandbox]:
        return [box for box in (self.sandbox, self._own_sandbox) if box is not None]

    def close(self) -> None:
        if self._own_sandbox is not None:
            self._own_sandbox.close()

    @pytest.fixture
    def check_seed(self, request: pytest.FixtureRequest) -> int:
        """A per-check seed derived from the run's seed, so one failing check can be replayed."""
        return zlib.crc32(f"{self.seed}:{request.node.stash.get(_CHECK_KEY, '')}".encode())

    # ---------------------------------------------------------------- running
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        spec = self.lesson.check(item.stash[_CHECK_KEY])
        # The check's CPU budget, and the wall-clock bound's backstop for platforms without
        # SIGALRM (pytest-timeout normally fires first).
        boxes = [box for box in (self.sandbox, self._own_sandbox) if box is not None]
        for box in boxes:
            box.begin_check(spec.timeout)
        try:
            return (yield)
        finally:
            for box in boxes:
                box.end_check()
                self._saw_worker(box)

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        # Before the fixtures: a worker that never starts is this check's hang too.
        check_id = item.stash.get(_CHECK_KEY, None)
        if check_id is not None:
            self._call_back(self.on_start, check_id)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem):
        try:
            return (yield)
        finally:
            # The check is over once its last test's teardown is: its result is final.
            check_id = item.stash.get(_CHECK_KEY, None)
            if check_id in self._left:
                self._left[check_id] -= 1
                if self._left[check_id] == 0 and check_id in self.records:
                    self._call_back(self.on_check, self.records[check_id])

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        check_id = item.stash.get(_CHECK_KEY, None)
        if (
            check_id is None
            or check_id in self.records
            and self.records[check_id].status is not Status.PASSED
        ):
            return report
        spec = self.lesson.check(check_id)
        if call.when == "call" and report.passed:
            result = CheckResult(
                spec.id,
                spec.todo,
                Status.PASSED,
                float(spec.points),
                float(spec.points),
                duration=call.duration,
            )
        elif call.excinfo is not None:
            status, feedback = self.classify(call.excinfo.value, spec)
            max_score = 0.0 if status is Status.SKIPPED else float(spec.points)
            result = CheckResult(
                spec.id,
                spec.todo,
                status,
                0.0,
                max_score,
                feedback,
                call.duration,
                figures=list(getattr(call.excinfo.value, "figures", ())),
            )
            waits = (
                getattr(call.excinfo.value, "waits_on", None)
                if isinstance(call.excinfo.value, CheckFailure)
                else None
            )
            if waits is not None and waits != spec.todo and waits in self._todo_titles:
                result.waits_on = waits
                result.feedback = Feedback(
                    (
                        *result.feedback.parts,
                        message("engine.waits_on_other_todo", todo=spec.todo, other=waits),
                    )
                )
            if isinstance(call.excinfo.value, StudentError):
                result.raised_in = self.raised_in(call.excinfo.value)
                if result.raised_in is not None and result.raised_in.todo != spec.todo:
                    result.waits_on = result.raised_in.todo
        else:
            return report
        self.records[check_id] = result
        return report

    def raised_in(self, err: StudentError) -> RaisedIn | None:
        """Where in the lesson's TODOs the learner's exception was raised (None: no claim)."""
        return blame.raised_in(err, self.lesson.files, [t.id for t in self.lesson.todos], self.stubs)

    def classify(self, exc: BaseException, spec) -> tuple[Status, Feedback]:
        if isinstance(exc, CheckFailure):
            return Status.FAILED, exc.feedback
        if isinstance(exc, StudentError):
            return Status.FAILED, describe_student_error(
                exc, spec.todo, self._todo_titles, self.raised_in(exc)
            )
        if isinstance(exc, WorkerDied):
            return Status.ERROR, exc.feedback
        if isinstance(exc, pytest.skip.Exception):
            return Status.SKIPPED, Feedback.of(
                Text(exc.msg)
                if exc.msg.count(".") == 1 and " " not in exc.msg
                else message("engine.skipped", reason=exc.msg)
            )
        if isinstance(exc, pytest.fail.Exception) and str(exc.msg).startswith("Timeout"):
            if cpu_clock.measurable():
                return Status.ERROR, Feedback.of(
                    message(
                        "engine.timeout_wall",
                        cpu=f"{spec.timeout:g}",
                        seconds=f"{cpu_clock.wall_bound(spec.timeout):g}",
                    )
                )
            return Status.ERROR, Feedback.of(message("engine.timeout", seconds=spec.timeout))
        if isinstance(exc, AssertionError):
            return Status.FAILED, Feedback.of(message("engine.assertion", detail=str(exc)[:500]))
        return Status.ERROR, Feedback.of(
            message("engine.internal_error", type=type(exc).__name__, detail=str(exc)[:500])
        )
