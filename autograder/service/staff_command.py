"""`autograder staff`: instructors' and assistants' tokens for the live page."""

# Issue 33: being written; this stub registers the command.

from __future__ import annotations


def add_parser(sub) -> None:
    from autograder.core.results import message

    sub.add_parser("staff", help=message("service.staff.help"), description=message("service.staff.help"))


def main(course, args) -> int:
    from autograder.cohort.outputs import Say

    Say(args.lang or course.language).line("service.staff.help")
    return 2
