"""`autograder stubs`: the stubs of exercises/ regenerated from the TODO regions of solutions/
(the work is autograder/course/stubs.py's `sync`; the reference pieces are derived when grading,
never written here).

    autograder stubs [--check]

--check writes nothing: it prints each file that would change and exits 1 if any would, 0 if
none. A solution file out of line with course.yml is a usage error (2) that says where.
"""

from __future__ import annotations

import sys

from autograder.core import i18n
from autograder.core.manifest import Course


def add_parser(sub) -> None:
    from autograder.core.results import message  # help texts are catalog messages (messages/<lang>/cli.yml)

    stubs = sub.add_parser(
        "stubs", help=message("cli.stubs.help"), description=message("cli.stubs.description")
    )
    stubs.add_argument("--check", action="store_true", help=message("cli.stubs.check"))


def main(course: Course, args) -> int:
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
    # No --lang of its own: args.lang is the command line's language (autograder/cli.py).
    print(i18n.translate("cli.stubs_regenerated", args.lang or course.language, changed=len(drift)))
    return 0
