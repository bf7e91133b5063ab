"""`autograder release --out DIR [--force]`: the template repository learners create theirs
from, without solutions/, reference code, quiz keys or any secret (the work is
autograder/course/release.py's `build_release`). A stale recording is regenerated first
(`autograder record`'s work, said in one line per lesson). A release it cannot write is a usage
error (2) that says why.
"""

from __future__ import annotations

import sys
from pathlib import Path

from autograder.core import i18n
from autograder.core.manifest import Course


def add_parser(sub) -> None:
    from autograder.core.results import message  # help texts are catalog messages (messages/<lang>/cli.yml)

    release = sub.add_parser(
        "release", help=message("cli.release.help"), description=message("cli.release.description")
    )
    release.add_argument(
        "--out", type=Path, required=True, metavar=message("cli.metavar.dir"), help=message("cli.release.out")
    )
    release.add_argument("--force", action="store_true", help=message("cli.release.force"))


def main(course: Course, args) -> int:
    from autograder.course.record import record_lesson
    from autograder.course.release import ReleaseError, build_release

    def rerecord(course, lesson):
        done = record_lesson(course, lesson)
        print(done.line, flush=True)
        return done

    try:
        report = build_release(course, args.out, force=args.force, rerecord=rerecord)
    except ReleaseError as exc:
        print(f"autograder release: {exc}", file=sys.stderr)
        return 2
    # No --lang of its own: args.lang is the command line's language (autograder/cli.py).
    print(
        i18n.translate(
            "cli.release_written", args.lang or course.language, out=args.out, files=len(report.files)
        )
    )
    return 0
