"""`autograder record [--lesson ID]`: regenerate the recordings the learner release grades with
(the work is autograder/course/record.py's `record_lesson`). For the instructor's checkout:
it grades the solutions and the stubs of each lesson in record mode at the practice seed. A
lesson that cannot be recorded (its graders not converted to `recording.reference_of`, no
reference.py) is skipped with a line that says why; exit 1 when a lesson's solutions fail
in record mode (nothing is written for it), else 0.
"""

from __future__ import annotations

import sys

from autograder.core.manifest import Course


def add_parser(sub) -> None:
    from autograder.core.results import message  # help texts are catalog messages (messages/<lang>/cli.yml)

    record = sub.add_parser(
        "record", help=message("cli.record.help"), description=message("cli.record.description")
    )
    record.add_argument(
        "--lesson", default=None, metavar=message("cli.metavar.lesson"), help=message("cli.record.lesson")
    )


def main(course: Course, args) -> int:
    from autograder.course.record import record_lesson

    lessons = [course.lesson(args.lesson)] if args.lesson is not None else list(course.lessons)
    code = 0
    for lesson in lessons:
        report = record_lesson(course, lesson)
        print(report.line, flush=True)
        for name, why in sorted(report.unrecordable.items()):
            print(f"  not recordable (judged only officially in practice): ref.{name}: {why}")
        if report.state == "failed":
            code = 1
    if code:
        print("autograder record: some lessons were not recorded (see above)", file=sys.stderr)
    return code
