"""The `autograder` command line: a contract that the CI workflow and other tools call.

    autograder grade [LESSON ...] [--submission DIR]
                     [--format text|json|markdown|gradescope]
                     [--output FILE] [--lang es|en] [--seed N]
    autograder stubs [--check]
    autograder release --out DIR [--force]
    autograder ci record|report ...   (steps of .github/workflows/grade.yml)

`grade` exits 0 whenever grading ran, whatever the score; 2 for usage errors (an unknown
lesson, a malformed course.yml, a retired format such as `classroom`, which went with GitHub
Classroom on 2026-08-28); 1 for an internal failure, always with a message.

Every text of the command line (help, usage errors, argparse's own words) comes from the
catalogs (messages/<lang>/cli.yml), in one language chosen before parsing, with one precedence:
`--lang` on the command line, over $AUTOGRADER_LANG, over course.yml's `language`, over Spanish.
$AUTOGRADER_LANG also sets the feedback's language of every command that has --lang.
"""

from __future__ import annotations

import argparse
import atexit
import difflib
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from autograder import __version__
from autograder.cli_language import (LANG_ENV_VAR, argparse_language, cli_language, env_language_warning,
                                     localize, parser_class, usage_error_line)
from autograder.core import i18n
from autograder.core.manifest import ManifestError, load_course
from autograder.core.results import message

FORMATS = ("text", "json", "markdown", "gradescope")
# Formats that existed once: asked for, they are a usage error that says why and what remains.
RETIRED_FORMATS = {"classroom": "cli.format_classroom_retired"}


def build_parser(lang: str = i18n.DEFAULT_LANGUAGE) -> argparse.ArgumentParser:
    """The whole command line, its texts in `lang` (argparse's own words only while
    `argparse_language(lang)` is active, as `main` does)."""
    parser = parser_class(lang)(prog="autograder", description=message("cli.description"),
                                 epilog=message("cli.epilog"))
    parser.add_argument("--version", action="version", version=f"autograder {__version__}",
                        help=message("cli.version"))
    parser.add_argument("--course", type=Path, default=None, metavar=message("cli.metavar.file"), help=message("cli.course"))
    # Before the command, for every command; a command's own --lang (dest "lang") wins over it.
    parser.add_argument("--lang", dest="cli_lang", choices=i18n.LANGUAGES, default=None, help=message("cli.lang"))
    sub = parser.add_subparsers(dest="command", required=True, title=i18n.translate("cli.commands", lang),
                                metavar=message("cli.command_metavar"), help=message("cli.command_help"))

    grade = sub.add_parser("grade", help=message("cli.grade.help"), description=message("cli.grade.description"))
    grade.add_argument("lessons", nargs="*", metavar=message("cli.metavar.lesson"), help=message("cli.lessons"))
    grade.add_argument("--submission", type=Path, default=None, metavar=message("cli.metavar.dir"), help=message("cli.grade.submission"))
    formats = grade.add_argument("--format", choices=FORMATS, default="text", help=message("cli.grade.format"))
    formats.retired = RETIRED_FORMATS  # read by the command line's parser (autograder/cli_language.py)
    grade.add_argument("--output", type=Path, default=None, metavar=message("cli.metavar.file"), help=message("cli.grade.output"))
    grade.add_argument("--lang", choices=i18n.LANGUAGES, default=None, help=message("cli.lang"))
    grade.add_argument("--seed", type=int, default=None, help=message("cli.grade.seed"))
    grade.add_argument("--verbose", action="store_true", help=message("cli.grade.verbose"))
    grade.add_argument("--figures", type=Path, default=None, metavar=message("cli.metavar.dir"), help=message("cli.grade.figures"))

    stubs = sub.add_parser("stubs", help=message("cli.stubs.help"), description=message("cli.stubs.description"))
    stubs.add_argument("--check", action="store_true", help=message("cli.stubs.check"))

    release = sub.add_parser("release", help=message("cli.release.help"),
                             description=message("cli.release.description"))
    release.add_argument("--out", type=Path, required=True, metavar=message("cli.metavar.dir"), help=message("cli.release.out"))
    release.add_argument("--force", action="store_true", help=message("cli.release.force"))

    for name in COMMAND_MODULES.values():
        importlib.import_module(name).add_parser(sub)
    localize(parser, lang)
    return parser


# Commands that live in a module of their own: each has add_parser(subparsers) (registering one
# sub-command named like the key) and main(course, args) -> exit code. Their modules keep
# heavy imports (torch, nbgrader, matplotlib) inside functions, so `--help` stays fast.
COMMAND_MODULES = {
    "ci": "autograder.github.steps",
    "grade-all": "autograder.cohort.grade_all",
    "handout": "autograder.github.handout",
    "notebooks": "autograder.course.notebooks",
    "check": "autograder.learner.check",
    "watch": "autograder.learner.watch",
    "hint": "autograder.learner.hints",
    "progress": "autograder.learner.progress",
    "viewer": "autograder.learner.viewer",
}


class UsageError(Exception):
    """A command the course cannot run as typed (an unknown lesson, a wrong folder): reported
    once, in the command line's language, with exit status 2."""


def run() -> None:
    """The `autograder` console script and `python -m autograder`: main(), then the process
    exits without tearing its modules down. With torch loaded that teardown costs ~0.4 s of
    every command, after everything is written; the exit handlers (the warm pool's zygote,
    temporary folders) still run first."""
    printable_streams()
    code = main()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing left to say there
            pass
    os._exit(code)


def printable_streams() -> None:
    """Output that never dies of a character: on Windows a pipe (an IDE's run console) gets the
    ANSI code page, where the progress bar's █ or a learner's emoji cannot be encoded; such a
    character is written as ? instead of ending the command with UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="replace")
        except (AttributeError, ValueError):  # not a text file (a test's StringIO), or closed
            pass


# Commands that run a learner's code in workers: their warm pool starts as soon as the command
# line is known to be good (see main).
GRADING_COMMANDS = frozenset({"grade", "check", "watch", "viewer"})


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    lang = cli_language(argv)
    warning = env_language_warning(os.environ, lang)
    if warning:
        print(warning, file=sys.stderr)
    with argparse_language(lang):
        parser = build_parser(lang)
        args = parser.parse_args(argv)
    if getattr(args, "lang", "absent") is None:  # every command reads `args.lang or course.language`
        env = os.environ.get(LANG_ENV_VAR, "").strip()
        args.lang = args.cli_lang or (env if env in i18n.LANGUAGES else None)
    try:
        course = load_course(args.course)
        check_lessons(course, args, lang)
        if args.command in GRADING_COMMANDS:
            # The zygote's torch import (~2.5 s of CPU, the longest step of a grading) overlaps
            # the trusted side's own imports. Only once the command line is known to be good:
            # a zygote started for `--help` or a usage error would import torch for nothing.
            from autograder.sandbox.client import start_warm_pool

            start_warm_pool()
        if args.command == "grade":
            return _grade(course, args, parser)
        if args.command == "release":
            return _release(course, args, lang)
        if args.command in COMMAND_MODULES:
            return importlib.import_module(COMMAND_MODULES[args.command]).main(course, args)
        return _stubs(course, args, lang)
    except UsageError as exc:
        print(usage_error_line(f"autograder {args.command}", str(exc), lang), file=sys.stderr)
        return 2
    except ManifestError as exc:
        print(f"autograder: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"autograder: {i18n.translate('cli.interrupted', lang)}", file=sys.stderr)
        return 130
    except Exception as exc:  # an internal failure: say so plainly, never a silent non-zero
        import traceback

        traceback.print_exc()
        print("autograder: " + i18n.translate("cli.internal_error", lang, type=type(exc).__name__, detail=str(exc)),
              file=sys.stderr)
        return 1


def check_lessons(course, args, lang: str) -> None:
    """Every lesson the command names exists in the course; else a UsageError that lists them
    and suggests the closest (every command's `LESSON` argument is `lessons` or `lesson`)."""
    keys = list(getattr(args, "lessons", None) or [])
    if getattr(args, "lesson", None) is not None:
        keys.append(args.lesson)
    for key in keys:
        try:
            course.lesson(key)
        except ManifestError:
            raise UsageError(unknown_lesson_text(course, str(key), lang)) from None


def unknown_lesson_text(course, key: str, lang: str) -> str:
    names = [name for lesson in course.lessons for name in (lesson.id, lesson.slug, lesson.folder)]
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    listing = ", ".join(f"{lesson.id} {lesson.slug}" for lesson in course.lessons)
    return i18n.translate("cli.unknown_lesson_close" if close else "cli.unknown_lesson", lang,
                          key=key, close=close[0] if close else "", lessons=listing)


def _grade(course, args, parser) -> int:
    from autograder.engine.split import grade
    from autograder.engine.feedback import redact, secrets_from_environ
    from autograder.learner.steps import grade_step, step_line
    from autograder.render.output import render_json, render_markdown, render_text
    from autograder.sandbox.isolation import hide_environment

    lessons = [course.lesson(key) for key in args.lessons] if args.lessons else list(course.lessons)
    hide_environment()
    lang = args.lang or course.language
    if args.submission is not None:
        check_submission(course, lessons, args.submission, lang)
    if args.output is not None and args.output.is_dir():
        raise UsageError(i18n.translate("cli.output_is_folder", lang, path=args.output))
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
        text = render_text(result, lang, color=color, verbose=args.verbose,
                           step=step_line(step, result, lang) if step is not None else None)
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


def check_submission(course, lessons, submission: Path, lang: str) -> None:
    """--submission names a folder where grading finds something of these lessons; else one
    UsageError now, instead of every check of every lesson failing on a missing file."""
    from autograder.engine.grading import lesson_submission_dir

    if not submission.is_dir():
        raise UsageError(i18n.translate("cli.submission_not_folder", lang, folder=submission))
    single = len(lessons) == 1
    for lesson in lessons:
        folder = lesson_submission_dir(course, lesson, submission, single)
        if any((folder / name).is_file() for name in lesson.handed_in):
            return
    if single:
        lesson = lessons[0]
        text = i18n.translate("cli.submission_no_lesson_files", lang, folder=submission, id=lesson.id,
                              files=", ".join(lesson.handed_in))
        found = _nearby(submission, lesson.handed_in, prefer=lesson.folder)
        if found is not None:
            text += " " + i18n.translate("cli.submission_found_at", lang, id=lesson.id, found=found)
        raise UsageError(text)
    text = i18n.translate("cli.submission_no_lessons", lang, folder=submission, example=f"{lessons[0].folder}/")
    found = _nearby(submission, [lesson.folder for lesson in lessons])
    if found is not None:
        text += " " + i18n.translate("cli.submission_lessons_at", lang, found=found)
    raise UsageError(text)


def _nearby(folder: Path, names: Sequence[str], prefer: str | None = None) -> Path | None:
    """The folder one or two levels below `folder` that holds one of `names` (the likely meant
    --submission), one called `prefer` first; None if there is none."""
    found = [path.parent for depth in ("*", "*/*") for name in names for path in sorted(folder.glob(f"{depth}/{name}"))]
    found.sort(key=lambda path: path.name != prefer)  # stable: keeps the shallower first
    return found[0] if found else None


def _release(course, args, lang: str) -> int:
    from autograder.course.release import ReleaseError, build_release

    try:
        report = build_release(course, args.out, force=args.force)
    except ReleaseError as exc:
        print(f"autograder release: {exc}", file=sys.stderr)
        return 2
    print(i18n.translate("cli.release_written", lang, out=args.out, files=len(report.files)))
    return 0


def _stubs(course, args, lang: str) -> int:
    from autograder.course.stubs import StubError, sync

    try:
        drift = sync(course, check_only=args.check)
    except StubError as exc:  # a solution file out of line with course.yml: say where, no traceback
        print(f"autograder stubs: {exc}", file=sys.stderr)
        return 2
    for line in drift:
        print(line)
    if args.check:
        return 1 if drift else 0
    print(i18n.translate("cli.stubs_regenerated", lang, changed=len(drift)))
    return 0


class _Progress:
    """Lesson-by-lesson progress on stderr in a terminal; nothing when redirected."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._progress = None

    def start(self, total: int) -> None:
        if not self.enabled:
            return
        from rich.progress import Progress, SpinnerColumn, TextColumn, BarColumn
        from rich.console import Console

        self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                  TextColumn("{task.completed}/{task.total}"),
                                  console=Console(stderr=True), transient=True)
        self._progress.start()
        self._task = self._progress.add_task("grading", total=total)

    def advance(self, lesson_result) -> None:
        if self._progress is not None:
            self._progress.update(self._task, advance=1, description=f"{lesson_result.id}-{lesson_result.slug}")

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()


if __name__ == "__main__":
    sys.exit(main())
