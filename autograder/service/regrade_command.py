"""`autograder regrade`: queues the counting submissions again with the current graders (regrading lane)."""

# Issue 33: being written; this stub registers the command.

from __future__ import annotations


def add_parser(sub) -> None:
    from autograder.core.results import message

    sub.add_parser(
        "regrade", help=message("service.regrade.help"), description=message("service.regrade.help")
    )


def main(course, args) -> int:
    from autograder.cohort.outputs import Say

    Say(args.lang or course.language).line("service.regrade.help")
    return 2
