"""The pytest plugin a grading run hands to pytest (engine/grading.py runs pytest with it, in
this trusted process): it gives each grader test the course.yml check its `check` marker names,
with that check's timeout; orders the checks a caller asked for first; provides the fixtures the
graders talk to the learner's code through (`submission`, `own_submission`, `check_seed`); and
turns each test's outcome into the check's CheckResult: points, status, feedback, the TODO a
learner's error was raised in and the TODO a failure waits on.

Its hooks are called by pytest only; the grading run reads `records`, `internal_error`,
`interrupted` and `callback_error` once pytest is done.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from autograder.core.manifest import Lesson
from autograder.core.results import CheckResult, Feedback, RaisedIn, Status, Text, message
from autograder.engine import blame, learner_errors, recording
from autograder.engine.checks import CheckFailure, describe_student_error
from autograder.engine.hangs import POLICY_OFFICIAL, LessonHangs
from autograder.sandbox import cpu_clock
from autograder.sandbox.client import Sandbox, StudentError, WorkerDied

_CHECK_KEY = pytest.StashKey[str]()
# A check the recording cannot answer (replay mode, engine/recording.py): judged only officially.
OFFICIAL_ONLY = "engine.official_only"


def is_official_only(check: CheckResult) -> bool:
    return check.status is Status.SKIPPED and any(
        getattr(part, "key", None) in (OFFICIAL_ONLY, "engine.official_only_again")
        for part in check.feedback.parts
    )


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
        # Each check's budget, and what a check that ran out of time costs the others (hangs.py).
        self.hangs = LessonHangs(lesson, POLICY_OFFICIAL, None, self.learner_files)

    def pytest_keyboard_interrupt(self, excinfo) -> None:
        # pytest also calls this for its own Interrupted (a collection error), which subclasses
        # KeyboardInterrupt: only a real Ctrl-C stops the whole grading run; a graders file that
        # does not collect is "graders broken" (grading.py), an instructor's problem.
        self.interrupted = excinfo.errisinstance(KeyboardInterrupt) and not excinfo.errisinstance(
            pytest.Session.Interrupted
        )

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
        self.hangs.prepare(box)
        if box.holds_everything:
            return box  # its code already ran out of time: no worker needed to say so
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

    def learner_files(self, box: Sandbox) -> list[str]:
        """The learner's own files in `box`: the lesson's, and in the own-pieces sandbox their
        files of the lessons it uses (elsewhere those are reference pieces)."""
        own = list(self.own or ()) if box is self._own_sandbox else []
        return [*self.lesson.files, *own]

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
            self.hangs.begin(spec, box)
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
        earlier = self.records.get(check_id) if check_id is not None else None
        if check_id is None or (
            earlier is not None and earlier.status is not Status.PASSED and not is_official_only(earlier)
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
                        # A check of no TODO (course.yml todo: null) must not read "TODO [None]".
                        message("engine.waits_on_other_todo", todo=spec.todo, other=waits)
                        if spec.todo is not None
                        else message("engine.check_waits_on_todo", other=waits),
                    )
                )
            if isinstance(call.excinfo.value, StudentError):
                result.raised_in = self.raised_in(call.excinfo.value)
                if result.raised_in is not None and result.raised_in.todo != spec.todo:
                    result.waits_on = result.raised_in.todo
            self.hangs.after(spec, result, call.excinfo.value, self.sandboxes())
        else:
            return report
        if (
            earlier is not None
            and is_official_only(earlier)
            and result.status not in (Status.FAILED, Status.ERROR)
        ):
            return report  # part of the check is official-only: only a failure says more
        self.records[check_id] = result
        return report

    def raised_in(self, err: StudentError) -> RaisedIn | None:
        """Where in the lesson's TODOs the learner's exception was raised (None: no claim)."""
        return blame.raised_in(err, self.lesson.files, [t.id for t in self.lesson.todos], self.stubs)

    def learner_paths(self, err: StudentError) -> dict[str, str]:
        """The learner's files in the worker that raised `err`, by their course path."""
        own = self._own_sandbox is not None and err.root == str(self._own_sandbox.root)
        return learner_errors.learner_paths(self.lesson, self.own if own else None)

    def classify(self, exc: BaseException, spec) -> tuple[Status, Feedback]:
        if isinstance(exc, CheckFailure):
            caught = exc.__cause__ or exc.__context__  # the learner's error the grader was handling
            broken = (
                learner_errors.load_error(caught, self.learner_paths(caught))
                if isinstance(caught, StudentError)
                else None
            )
            if broken is not None:  # a file that does not load: its one line, not the grader's words
                return Status.FAILED, Feedback.of(broken)
            return Status.FAILED, exc.feedback
        if isinstance(exc, StudentError):
            broken = learner_errors.load_error(exc, self.learner_paths(exc))
            if broken is not None:  # a file that does not load: one line, filed under the file
                return Status.FAILED, Feedback.of(broken)
            return Status.FAILED, describe_student_error(
                exc, spec.todo, self._todo_titles, self.raised_in(exc)
            )
        if isinstance(exc, WorkerDied):
            return Status.ERROR, exc.feedback
        if isinstance(exc, recording.NotRecorded):
            return Status.SKIPPED, Feedback.of(message(OFFICIAL_ONLY))
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
