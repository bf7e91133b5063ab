"""The `autograder` command line: a contract that the CI workflow and other tools call.

    autograder [--course FILE] [--lang es|en] COMMAND ...
    autograder grade [LESSON ...] [--submission DIR]
                     [--format text|json|markdown|gradescope]
                     [--output FILE] [--lang es|en] [--seed N]
    autograder stubs [--check]
    autograder release --out DIR [--force]
    autograder record [--lesson ID]   (the recordings the learner release grades with)
    autograder ci record|report ...   (steps of .github/workflows/grade.yml)
    autograder serve --roster FILE --public-url URL   (the grading service)
    autograder similarity NOTAS [SUBMISSIONS]   (the cohort's similarity report)

This module parses and dispatches; each command lives in a module of its own, listed in
COMMANDS, next to the work it does. `grade` exits 0 whenever grading ran, whatever the score;
every command exits 2 for usage errors (an unknown lesson, a malformed course.yml, a retired
format such as `classroom`, which went with GitHub Classroom on 2026-08-28); 1 for an internal
failure, always with a message.

Every text of the command line (help, usage errors, argparse's own words) comes from the
catalogs (messages/<lang>/cli.yml), in one language chosen before parsing, with one precedence:
`--lang` on the command line, over $AUTOGRADER_LANG, over course.yml's `language`, over Spanish
(autograder/cli_language.py). $AUTOGRADER_LANG also sets the feedback's language of every
command that has --lang; a command without one speaks the command line's language.
"""

from __future__ import annotations

import argparse
import atexit
import difflib
import importlib
import os
import sys
from pathlib import Path

from autograder import __version__
from autograder.cli_language import (
    LANG_ENV_VAR,
    argparse_language,
    cli_language,
    env_language_warning,
    localize,
    parser_class,
    usage_error_line,
)
from autograder.core import i18n
from autograder.core.manifest import ManifestError, load_course
from autograder.core.results import message

# Every command and the module that runs it, in the order --help lists them. Each module has
# add_parser(subparsers), registering one sub-command named like the key, and main(course, args)
# -> exit code. They keep heavy imports (torch, nbgrader, matplotlib) inside functions, so
# `--help` stays fast.
COMMANDS = {
    "grade": "autograder.learner.grade",
    "stubs": "autograder.course.stubs_command",
    "release": "autograder.course.release_command",
    "record": "autograder.course.record_command",
    "ci": "autograder.github.steps",
    "grade-all": "autograder.cohort.grade_all",
    "handout": "autograder.github.handout",
    "notebooks": "autograder.course.notebooks",
    "check": "autograder.learner.check",
    "watch": "autograder.learner.watch",
    "hint": "autograder.learner.hints",
    "progress": "autograder.learner.progress",
    "viewer": "autograder.learner.viewer",
    "serve": "autograder.service.serve",
    "worker": "autograder.service.worker_command",
    "staff": "autograder.service.staff_command",
    "regrade": "autograder.service.regrade_command",
    "similarity": "autograder.similarity.command",
}

# Commands that run a learner's code in workers: their warm pool starts as soon as the command
# line is known to be good (see main).
GRADING_COMMANDS = frozenset({"grade", "check", "watch", "viewer"})


class UsageError(Exception):
    """A command the course cannot run as typed (an unknown lesson): reported once, in the
    command line's language, with exit status 2."""


def build_parser(lang: str = i18n.DEFAULT_LANGUAGE) -> argparse.ArgumentParser:
    """The whole command line, its texts in `lang` (argparse's own words only while
    `argparse_language(lang)` is active, as `main` does)."""
    parser = parser_class(lang)(
        prog="autograder", description=message("cli.description"), epilog=message("cli.epilog")
    )
    parser.add_argument(
        "--version", action="version", version=f"autograder {__version__}", help=message("cli.version")
    )
    parser.add_argument(
        "--course", type=Path, default=None, metavar=message("cli.metavar.file"), help=message("cli.course")
    )
    # Before the command, for every command; a command's own --lang (dest "lang") wins over it.
    parser.add_argument(
        "--lang", dest="cli_lang", choices=i18n.LANGUAGES, default=None, help=message("cli.lang")
    )
    sub = parser.add_subparsers(
        dest="command",
        required=True,
        title=i18n.translate("cli.commands", lang),
        metavar=message("cli.command_metavar"),
        help=message("cli.command_help"),
    )
    for module in COMMANDS.values():
        importlib.import_module(module).add_parser(sub)
    localize(parser, lang)
    return parser


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


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    lang = cli_language(argv)
    warning = env_language_warning(os.environ, lang)
    if warning:
        print(warning, file=sys.stderr)
    with argparse_language(lang):
        parser = build_parser(lang)
        args = parser.parse_args(argv)
    # Every command reads its language as `args.lang or course.language`.
    if not hasattr(args, "lang"):  # no --lang of its own: the command line's language
        args.lang = lang
    elif args.lang is None:
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
        return importlib.import_module(COMMANDS[args.command]).main(course, args)
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
        print(
            "autograder: "
            + i18n.translate("cli.internal_error", lang, type=type(exc).__name__, detail=str(exc)),
            file=sys.stderr,
        )
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
    return i18n.translate(
        "cli.unknown_lesson_close" if close else "cli.unknown_lesson",
        lang,
        key=key,
        close=close[0] if close else "",
        lessons=listing,
    )


if __name__ == "__main__":
    sys.exit(main())
