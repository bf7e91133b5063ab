"""The grading engine: runs a lesson's hidden graders (pytest, in this trusted process)
against a submission served by a sandboxed worker, and turns pytest's outcomes into results.

Here: which folder holds each lesson's files, the sandboxes they are graded in, and the one
pytest run per lesson; pytest_plugin.py is the plugin that run gets (fixtures, each test's
check, its outcome as a CheckResult). The graders never import the learner's code; each check
talks to it through the `submission` fixture. A check's TODO, points and timeout come from
course.yml; pytest-timeout enforces the timeout, and the sandbox kills the worker of an
interrupted check so the next one starts clean.

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
from pathlib import Path
from typing import Iterable, Sequence

import pytest

from autograder.core.manifest import Course, Lesson
from autograder.core.results import (
    CheckResult,
    CourseResult,
    Feedback,
    LessonResult,
    Status,
    combine_isolation,
    message,
)
from autograder.engine import recording, references
from autograder.engine.hangs import POLICY_OFFICIAL, LessonHangs
from autograder.engine.practice import grade_practice, has_practice_tests
from autograder.engine.pytest_plugin import OFFICIAL_ONLY, GradingPlugin, is_official_only
from autograder.sandbox.client import Limits, Sandbox
from autograder.sandbox.intake import contained, refused

GRADERS_ROOT = Path(__file__).resolve().parents[1] / "graders"


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
    hang_policy: str = POLICY_OFFICIAL,
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
    whichever process takes it.

    `hang_policy`: what a check that runs out of time costs the lesson's other checks
    (engine/hangs.py): "official" (the default: each later check gets a short first budget) or
    "learner" (`check`, `watch`: the code that hung is not run again in that lesson). Given by
    the command, never read from the learner's environment."""
    lessons = list(lessons)
    lang = lang or course.language
    # For graders that compute with the reference pieces, or ask blame with the lesson's stubs.
    references.use(course, solutions_dir(course), graders_root())
    seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
    if lessons and all(
        recording.lesson_mode(graders_root() / lesson.graders) == "replay" for lesson in lessons
    ):
        # Graded from recordings (the learner release): every lesson uses the recording's fixed
        # practice inputs, so that is the seed the result names (any other would repeat nothing).
        seed = recording.PRACTICE_SEED
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
                hang_policy=hang_policy,
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
    if recording.lesson_mode(graders_root() / lesson.graders) in ("official", "record"):
        return reference_files(course, lesson)
    return own or {}  # practice: no reference pieces ship, the learner's own pieces stand in


def stub_folder(course: Course, lesson: Lesson, submission: Path) -> Path | None:
    """Where the lesson's untouched stubs are, for autograder/engine/blame.py: made from the
    solutions, else those a learner release ships beside the lesson's graders, else the course's
    exercises/ when it is not the folder being graded (a learner's repository holds their own
    code there); None when none exists."""
    return references.stub_folder(
        course, lesson, submission, solutions_dir(course), graders_root() / lesson.graders
    )


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
    hang_policy: str = POLICY_OFFICIAL,
) -> LessonResult:
    """Grade one lesson in `sandbox`; `own` are the learner's own files of the lessons it uses
    (for the `own_submission` fixture), None when they are not there; `stubs` the folder of the
    lesson's untouched stubs (to tell which TODO a line that raised belongs to). `first`,
    `on_start(check_id)`, `on_check(check)` and `on_worker(pid)`: as in `grade`."""
    plugin = GradingPlugin(lesson, sandbox, seed, own)
    plugin.stubs = stubs
    plugin.hangs = LessonHangs(lesson, hang_policy, stubs, plugin.learner_files)
    plugin.first, plugin.on_start, plugin.on_check, plugin.on_worker = (
        tuple(first),
        on_start,
        on_check,
        on_worker,
    )
    folder = graders_root() / lesson.graders
    mode = recording.lesson_mode(folder)  # replay: graders without reference.py, with a recording
    if (not folder.is_dir() or mode == "none") and has_practice_tests(sandbox.submission):
        # A student release graded without the instructor's hidden graders: say so, and grade
        # with what the learner has, rather than giving nothing.
        return grade_practice(lesson, sandbox, stubs=stubs)
    missing = sandbox.provided_missing
    if not folder.is_dir() or mode == "none":
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
            with recording.session(folder) as active:
                if active is not None and active.replay is not None:
                    plugin.seed = active.replay.seed  # the recording's practice inputs
                # A recording holds only what ships: the official-only checks and the quiz
                # are not graded while recording (their values would ship unused).
                _run_pytest(folder, plugin, only_shipped=mode == "record")
        except recording.RecordingError as exc:
            plugin.internal_error = Feedback.of(
                message("engine.recording_invalid", lesson=lesson.id, detail=str(exc))
            )
        finally:
            plugin.close()
        if plugin.callback_error is not None:
            raise plugin.callback_error
    checks = [
        plugin.records.get(spec.id)
        or (
            recording_only(spec)  # an official-only check: its file does not ship
            if mode in ("replay", "record") and plugin.internal_error is None
            else CheckResult(
                spec.id,
                spec.todo,
                Status.ERROR,
                0.0,
                float(spec.points),
                plugin.internal_error or Feedback.of(message("engine.check_missing", check=spec.id)),
            )
        )
        for spec in lesson.checks
    ]
    if mode == "replay":
        say_each_skip_reason_once(checks)
    for spec, check in zip(lesson.checks, checks):
        check.informational = spec.informational
    result = LessonResult(
        lesson.id,
        lesson.slug,
        dict(lesson.title),
        lesson.xp,
        checks,
        mode="practice" if mode == "replay" else "hidden",
    )
    result.isolation = combine_isolation([box.isolation for box in plugin.sandboxes()])
    return result


def recording_only(spec) -> CheckResult:
    """A check judged only in the official grade (replay mode): skipped, worth 0 of 0."""
    return CheckResult(spec.id, spec.todo, Status.SKIPPED, 0.0, 0.0, Feedback.of(message(OFFICIAL_ONLY)))


def say_each_skip_reason_once(checks: list[CheckResult]) -> None:
    """The first official-only check of a lesson says why; the others only that they are too.
    Likewise a reason several checks were skipped for (lesson 05's own GPT differing from the
    reference in practice, say): said in full by the first, named by the others."""
    said = False
    reasons: list[tuple[Feedback, str]] = []  # (a skip's reason, the first check that gave it)
    for check in checks:
        if is_official_only(check):
            if said:
                check.feedback = Feedback.of(message("engine.official_only_again"))
            said = True
        elif check.status is Status.SKIPPED and check.feedback.parts:
            first = next((check_id for reason, check_id in reasons if reason == check.feedback), None)
            if first is None:
                reasons.append((check.feedback, check.id))
            else:
                check.feedback = Feedback.of(message("engine.skipped_as", check=first))


def _run_pytest(folder: Path, plugin: GradingPlugin, *, only_shipped: bool = False) -> None:
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
    if only_shipped:
        args += [
            f"--ignore={path}"
            for path in sorted(folder.glob("test_*.py"))
            if not recording.shipped(path.name)
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
