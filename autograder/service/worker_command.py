"""`autograder worker`: grades on any machine that reaches the service's queue and store."""

# Issue 33: being written; this stub registers the command.

from __future__ import annotations


def add_parser(sub) -> None:
    from autograder.core.results import message

    sub.add_parser(
        "worker", help=message("service.workercmd.help"), description=message("service.workercmd.help")
    )


def main(course, args) -> int:
    from autograder.cohort.outputs import Say

    Say(args.lang or course.language).line("service.workercmd.help")
    return 2
