"""`autograder grade`: one grading of a learner's lessons, written as text, JSON, Markdown or
Gradescope's results.json.

    autograder grade [LESSON ...] [--submission DIR]
                     [--format text|json|markdown|gradescope]
                     [--output FILE] [--lang es|en] [--seed N] [--verbose] [--figures DIR]

Learners run it in their repository, the GitHub workflow runs it with --format json, and
instructors run it on one submission (Gradescope's container too); it lives with the learner's
commands because its text ends with the learner's next step, the rule `check` follows
(autograder/learner/steps.py). Exits 0 whenever grading ran, whatever the score; 2 when
--submission or --output names a path grading cannot use, said in one line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from autograder.core import i18n
from autograder.core.manifest import Course

FORMATS = ("text", "json", "markdown", "gradescope")
# Formats that existed once: asked for, they are a usage error that says why and what remains.
RETIRED_FORMATS = {"classroom": "cli.format_classroom_retired"}


class PathError(Exception):
    """--submission or --output names a path grading cannot use: said before (or instead of)
    every check of every lesson failing on a missing file."""


def add_parser(sub) -> None:
    from autograder.core.results import message  # help texts are catalog messages (messages/<lang>/cli.yml)

    grade = sub.add_parser(
        "grade", help=message("cli.grade.help"), description=message("cli.grade.description")
    )
    grade.add_argument(
        "lessons", nargs="*", metavar=message("cli.metavar.lesson"), help=message("cli.lessons")
    )
    grade.add_argument(
        "--submission",
        type=Path,
        default=None,
        metavar=message("cli.metavar.dir"),
        help=message("cli.grade.submission"),
    )
    formats = grade.add_argument(
        "--format", choices=FORMATS, default="text", help=message("cli.grade.format")
    )
    formats.retired = RETIRED_FORMATS  # read by the command line's parser (autograder/cli_language.py)
    grade.add_argument(
        "--output",
        type=Path,
        default=None,
        metavar=message("cli.metavar.file"),
        help=message("cli.grade.output"),
    )
    grade.add_argument("--lang", choices=i18n.LANGUAGES, default=None, help=message("cli.lang"))
    grade.add_argument("--seed", type=int, default=None, help=message("cli.grade.seed"))
    grade.add_argument("--verbose", action="store_true", help=message("cli.grade.verbose"))
    grade.add_argument(
        "--figures",
        type=Path,
        default=None,
        metavar=message("cli.metavar.dir"),
        help=message("cli.grade.figures"),
    )


def main(course: Course, args) -> int:
    lang = args.lang or course.language
    try:
        return _grade(course, args, lang)
    except PathError as exc:
        # The line argparse prints for its own usage errors ("autograder grade: error: ..."),
        # which reads the same in every catalog.
        line = i18n.catalog(lang)["cli.argparse.error"].rstrip("\n") % {
            "prog": "autograder grade",
            "message": exc,
        }
        print(line, file=sys.stderr)
        return 2


def _grade(course: Course, args, lang: str) -> int:
    from autograder.engine.feedback import redact, secrets_from_environ
    from autograder.engine.split import grade
    from autograder.learner.steps import grade_step, step_line
    from autograder.render.output import render_json, render_markdown, render_text
    from autograder.sandbox.isolation import hide_environment

    lessons = [course.lesson(key) for key in args.lessons] if args.lessons else list(course.lessons)
    hide_environment()
    if args.submission is not None:
        check_submission(course, lessons, args.submission, lang)
    if args.output is not None and args.output.is_dir():
        raise PathError(i18n.translate("cli.output_is_folder", lang, path=args.output))
    progress = _Progress(enabled=sys.stderr.isatty())
    progress.start(len(lessons))
    result = grade(course, lessons, args.submission, lang=lang, seed=args.seed, on_lesson=progress.advance)
    progress.stop()
    if args.figures is not None:
        from autograder.render.figures import write_figures

        write_figures(result, args.figures, lang)
    if args.format == "json":
        text = render_json(result, lang)
    elif args.format == "markdown":
        text = render_markdown(result, lang)
    elif args.format == "gradescope":
        from autograder.render.formats import render_gradescope

        text = render_gradescope(result, lang)
    else:
        color = None if args.output is None else False
        step = grade_step(course, result, args.submission)  # the one next step, as `check` says it
        text = render_text(
            result,
            lang,
            color=color,
            verbose=args.verbose,
            step=step_line(step, result, lang) if step is not None else None,
        )
    # A learner's code may have read this process's environment; never echo a secret.
    text = redact(text, secrets_from_environ(os.environ))
    if args.output is not None:
        write_output(args.output, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0


def write_output(path: Path, text: str) -> None:
    """`--output FILE`: a file is replaced whole, so a reader never sees half of it; a path that
    exists and is not a file (/dev/null, /dev/stdout, a named pipe) is written into as it is.
    Renaming over it would put a regular file where the device was: as root, /dev/null itself."""
    if path.exists() and not path.is_file():
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def check_submission(course: Course, lessons, submission: Path, lang: str) -> None:
    """--submission names a folder where grading finds something of these lessons; else one
    PathError now, instead of every check of every lesson failing on a missing file."""
    from autograder.engine.grading import lesson_submission_dir

    if not submission.is_dir():
        raise PathError(i18n.translate("cli.submission_not_folder", lang, folder=submission))
    single = len(lessons) == 1
    for lesson in lessons:
        folder = lesson_submission_dir(course, lesson, submission, single)
        if any((folder / name).is_file() for name in lesson.handed_in):
            return
    if single:
        lesson = lessons[0]
        text = i18n.translate(
            "cli.submission_no_lesson_files",
            lang,
            folder=submission,
            id=lesson.id,
            files=", ".join(lesson.handed_in),
        )
        found = _nearby(submission, lesson.handed_in, prefer=lesson.folder)
        if found is not None:
            text += " " + i18n.translate("cli.submission_found_at", lang, id=lesson.id, found=found)
        raise PathError(text)
    text = i18n.translate(
        "cli.submission_no_lessons", lang, folder=submission, example=f"{lessons[0].folder}/"
    )
    found = _nearby(submission, [lesson.folder for lesson in lessons])
    if found is not None:
        text += " " + i18n.translate("cli.submission_lessons_at", lang, found=found)
    raise PathError(text)


def _nearby(folder: Path, names: Sequence[str], prefer: str | None = None) -> Path | None:
    """The folder one or two levels below `folder` that holds one of `names` (the likely meant
    --submission), one called `prefer` first; None if there is none."""
    found = [
        path.parent
        for depth in ("*", "*/*")
        for name in names
        for path in sorted(folder.glob(f"{depth}/{name}"))
    ]
    found.sort(key=lambda path: path.name != prefer)  # stable: keeps the shallower first
    return found[0] if found else None


class _Progress:
    """Lesson-by-lesson progress on stderr in a terminal; nothing when redirected."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._progress = None

    def start(self, total: int) -> None:
        if not self.enabled:
            return
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn

        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            console=Console(stderr=True),
            transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task("grading", total=total)

    def advance(self, lesson_result) -> None:
        if self._progress is not None:
            self._progress.update(
                self._task, advance=1, description=f"{lesson_result.id}-{lesson_result.slug}"
            )

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
