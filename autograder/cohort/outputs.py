"""What both halves of `grade-all` (grading, and --merge) say and write besides the results.

The instructor's messages from the catalog, made inert (Say); DIR's observation log read with
its unreadable lines reported (load_log); and, from the results in the store, the gradebook, the
CSVs, the report and the LMS files (canvas.csv, moodle.csv: autograder/term/lms.py), each
written on its own (publish); with deadlines, the gradebook, the CSVs and the LMS files hold the
term grades (autograder/cohort/term_grades.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

from autograder.cohort.observations import ObservationLog, Problem
from autograder.cohort.store import BatchError, Store, write_atomic
from autograder.core import i18n, neutral
from autograder.core.manifest import Course, Lesson
from autograder.core.results import CheckResult, CourseResult, Feedback, LessonResult, Status, Text


class Say:
    """The instructor's messages, from the catalog: notes on stderr, the summary on stdout."""

    def __init__(self, lang: str) -> None:
        self.lang = lang

    def text(self, key: str, **params) -> str:
        # Parameters may come from learners (folder and file names, a clone's error): inert.
        return neutral.terminal(i18n.translate(key, self.lang, **params))

    def line(self, key: str, **params) -> None:
        print(self.text(key, **params), file=sys.stderr, flush=True)

    def out(self, key: str, **params) -> None:
        print(self.text(key, **params), flush=True)


def load_log(folder: Path, say: Say) -> ObservationLog:
    """DIR's observation log, its unreadable lines reported; a log that cannot be read at all
    stops the run (grading on would stamp everyone with a new time)."""
    log = ObservationLog(folder)
    try:
        problems = log.load()
    except OSError as exc:
        raise BatchError("batch.observations_unreadable", file=str(log.path), detail=str(exc)) from None
    report_log_problems(say, problems)
    return log


def report_log_problems(say: Say, problems: list[Problem]) -> None:
    for problem in problems:
        key = "batch.observations_cut" if problem.cut else "batch.observations_bad_line"
        say.line(key, file=str(problem.path), line=problem.line, detail=problem.detail)


def publish(course: Course, store: Store, run: dict, lang: str, term=None) -> list[tuple[str, str]]:
    """The gradebook, the CSVs and the report, from the run's results in `store`, each written on
    its own: one that fails (a library missing, a full disk, a locked file) is reported and the
    others are still written. With `term` (term_grades.TermGrades: deadlines), the gradebook and
    the CSVs hold the term grades; the report stays about the latest results. Returns
    [(output, why)] of those that failed; results/ is never touched here."""
    from autograder.cohort.gradebook import cohort_csv, grades_csv, write_gradebook
    from autograder.cohort.report import load, render_chart, render_markdown

    cohort = load(course, run, store)
    outputs = (
        ("grades.csv", lambda: write_atomic(store.root / "grades.csv", grades_csv(cohort, term))),
        ("cohort.csv", lambda: write_atomic(store.root / "cohort.csv", cohort_csv(cohort, term))),
        (
            "report.md",
            lambda: write_atomic(store.root / "report.md", render_markdown(cohort, lang, chart="report.png")),
        ),
        ("report.png", lambda: render_chart(cohort, lang, store.root / "report.png")),
        ("gradebook.db", lambda: write_gradebook(store.root / "gradebook.db", cohort, term)),
    )
    notes = []
    outputs += (
        ("canvas.csv, moodle.csv", lambda: notes.extend(write_lms(course, cohort, term, store.root, lang))),
    )
    failures = []
    for name, write in outputs:
        try:
            write()
        except Exception as exc:  # noqa: BLE001 - any failure of one output must spare the others
            failures.append((name, f"{type(exc).__name__}: {exc}"))
    say = Say(lang)
    for note in notes:
        say.line(note.key, **note.params)
    return failures


def write_lms(course: Course, cohort, term, folder: Path, lang: str) -> list:
    """canvas.csv and moodle.csv (autograder/term/lms.py, 0600) from the same grades as
    grades.csv: the term grades with deadlines, else the latest results. Each lesson's maximum is
    the run's (gradebook.cell_points: a check nobody could run is worth 0). Returns the notes on
    who moodle.csv leaves out."""
    import dataclasses

    from autograder.cohort.gradebook import cell_points, lms_grade
    from autograder.core.roster import Learner
    from autograder.term.lms import TermRow, write_lms_files

    rows = []
    for entry in cohort.entries:
        record = entry.record
        person = Learner(
            record.learner,
            first_name=record.first_name or None,
            last_name=record.last_name or None,
            email=record.email or None,
        )
        rows.append(TermRow(person, {lesson.id: lms_grade(entry, lesson, term) for lesson in cohort.lessons}))
    points = {lesson.id: float(sum(cell_points(cohort, lesson).values())) for lesson in cohort.lessons}
    run_course = dataclasses.replace(course, lessons=list(cohort.lessons))
    return write_lms_files(folder, run_course, rows, points=points, lang=lang).notes()


def report_failed_outputs(say: Say, store: Store, failures: list[tuple[str, str]]) -> int:
    """Name each output that could not be written; exit status 1 when any failed (so a cron job
    notices), 0 otherwise. The results of every learner are in results/ either way."""
    for name, why in failures:
        say.line("batch.output_failed", output=str(store.root / name), detail=why)
    return 1 if failures else 0


def error_result_json(course: Course, lessons: list[Lesson], lang: str, seed: int, reason: Text) -> str:
    """A submission that could not be graded, in the shape of a grade: every check an error that
    says why, worth 0 (grade-all's errors and the grading service's), so that every reader of
    results (the report, the page, the exports) reads it alike."""
    from autograder.render.output import render_json

    result = CourseResult(
        course.name,
        lang,
        seed,
        [
            LessonResult(
                lesson.id,
                lesson.slug,
                dict(lesson.title),
                lesson.xp,
                [
                    CheckResult(
                        spec.id,
                        spec.todo,
                        Status.ERROR,
                        0.0,
                        float(spec.points),
                        Feedback.of(reason),
                        informational=spec.informational,
                    )
                    for spec in lesson.checks
                ],
            )
            for lesson in lessons
        ],
    )
    return render_json(result, lang)
