"""The `autograder` command line: a contract that the CI workflow and other tools call.

    autograder grade [LESSON ...] [--submission DIR]
                     [--format text|json|markdown|gradescope|classroom]
                     [--output FILE] [--lang es|en] [--seed N]
    autograder stubs [--check]
    autograder release --out DIR [--graders-ref REF] [--force]
    autograder ci record|report ...   (steps of .github/workflows/grade.yml)

`grade` exits 0 whenever grading ran, whatever the score; 2 for usage errors (an unknown
lesson, a malformed course.yml); 1 for an internal failure, always with a message.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

from . import __version__
from .manifest import ManifestError, load_course

FORMATS = ("text", "json", "markdown", "gradescope", "classroom")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="autograder", description="Transformers desde cero: grading engine.")
    parser.add_argument("--version", action="version", version=f"autograder {__version__}")
    parser.add_argument("--course", type=Path, default=None,
                        help="course.yml to use (default: $AUTOGRADER_COURSE, else found from the current folder)")
    sub = parser.add_subparsers(dest="command", required=True)

    grade = sub.add_parser("grade", help="grade lessons with the hidden graders")
    grade.add_argument("lessons", nargs="*", metavar="LESSON",
                       help="lesson id (03) or slug; none means every lesson in course.yml")
    grade.add_argument("--submission", type=Path, default=None, metavar="DIR",
                       help="with one LESSON, DIR holds that lesson's files; otherwise DIR holds "
                            "NN-slug/ folders like exercises/ (default: exercises/)")
    grade.add_argument("--format", choices=FORMATS, default="text")
    grade.add_argument("--output", type=Path, default=None, metavar="FILE", help="write here instead of stdout")
    grade.add_argument("--lang", choices=("es", "en"), default=None, help="feedback language (default: course.yml)")
    grade.add_argument("--seed", type=int, default=None, help="replay a run with the seed it reported")
    grade.add_argument("--verbose", action="store_true",
                       help="text format: every check's message in full (by default checks failing "
                            "for one cause are one block)")
    grade.add_argument("--figures", type=Path, default=None, metavar="DIR",
                       help="draw the attention matrices of failing mask checks as PNG files here "
                            "(the feedback says which)")

    stubs = sub.add_parser("stubs", help="regenerate exercises/ from the solutions' TODO regions")
    stubs.add_argument("--check", action="store_true", help="only report drift; exit 1 if any")

    release = sub.add_parser("release", help="build the learners' template repository (no solutions, "
                                             "no hidden graders)")
    release.add_argument("--out", type=Path, required=True, metavar="DIR")
    release.add_argument("--graders-ref", default=None, metavar="REF",
                         help="commit of this repository whose hidden graders the release fetches "
                              "(default: the current HEAD)")
    release.add_argument("--force", action="store_true", help="replace a previous release in DIR")

    for name in COMMAND_MODULES.values():
        importlib.import_module(name).add_parser(sub)
    return parser


# Commands that live in a module of their own: each has add_parser(subparsers) (registering one
# sub-command named like the key) and main(course, args) -> exit code. Their modules keep
# heavy imports (torch, nbgrader, matplotlib) inside functions, so `--help` stays fast.
COMMAND_MODULES = {
    "ci": "autograder.ci",
    "grade-all": "autograder.batch",
    "notebooks": "autograder.notebooks",
    "check": "autograder.learner",
    "watch": "autograder.watch",
    "hint": "autograder.hints",
    "progress": "autograder.progress",
    "viewer": "autograder.viewer",
}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        course = load_course(args.course)
        if args.command == "grade":
            return _grade(course, args, parser)
        if args.command == "release":
            return _release(course, args)
        if args.command in COMMAND_MODULES:
            return importlib.import_module(COMMAND_MODULES[args.command]).main(course, args)
        return _stubs(course, args)
    except ManifestError as exc:
        print(f"autograder: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("autograder: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # an internal failure: say so plainly, never a silent non-zero
        import traceback

        traceback.print_exc()
        print(f"autograder: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


def _grade(course, args, parser) -> int:
    from .engine import grade
    from .feedback import redact, secrets_from_environ
    from .render import grade_step, render_json, render_markdown, render_text

    lessons = [course.lesson(key) for key in args.lessons] if args.lessons else list(course.lessons)
    hide_environment()
    if args.submission is not None and not args.submission.is_dir():
        parser.error(f"--submission {args.submission}: not a folder")
    if args.output is not None and args.output.is_dir():
        parser.error(f"--output {args.output}: is a folder; give a file name")
    lang = args.lang or course.language
    progress = _Progress(enabled=sys.stderr.isatty())
    progress.start(len(lessons))
    result = grade(course, lessons, args.submission, lang=lang, seed=args.seed, on_lesson=progress.advance)
    progress.stop()
    if args.figures is not None:
        from .figures import write_figures

        write_figures(result, args.figures, lang)
    if args.format == "json":
        text = render_json(result, lang)
    elif args.format == "markdown":
        text = render_markdown(result, lang)
    elif args.format == "gradescope":
        from .formats import render_gradescope

        text = render_gradescope(result, lang)
    elif args.format == "classroom":
        from .formats import render_classroom

        text = render_classroom(result, lang)
    else:
        color = None if args.output is None else False
        step = grade_step(course, result, args.submission)  # the one next step, as `check` says it
        text = render_text(result, lang, color=color, verbose=args.verbose, step=step)
    # A learner's code may have read this process's environment; never echo a secret.
    text = redact(text, secrets_from_environ(os.environ))
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.output.with_name(args.output.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(args.output)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0


def hide_environment() -> None:
    """Linux: make this process non-dumpable, so its /proc files (environ included) belong to
    root and a learner's worker running as our own user cannot read our secrets there."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        pass


def _release(course, args) -> int:
    from .release import ReleaseError, build_release

    try:
        report = build_release(course, args.out, graders_ref=args.graders_ref, force=args.force)
    except ReleaseError as exc:
        print(f"autograder release: {exc}", file=sys.stderr)
        return 2
    for warning in report.warnings:
        print(f"autograder release: warning: {warning}", file=sys.stderr)
    print(f"release written to {args.out} ({len(report.files)} files; hidden graders fetched at "
          f"{report.graders_ref})")
    return 0


def _stubs(course, args) -> int:
    from .stubs import StubError, sync

    try:
        drift = sync(course, check_only=args.check)
    except StubError as exc:  # a solution file out of line with course.yml: say where, no traceback
        print(f"autograder stubs: {exc}", file=sys.stderr)
        return 2
    for line in drift:
        print(line)
    if args.check:
        return 1 if drift else 0
    print(f"exercises/ and the graders' reference pieces regenerated ({len(drift)} file(s) changed)")
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
