"""The Jupyter (nbgrader) edition of the course: `autograder notebooks --out DIR [LESSON ...]`.

Builds an nbgrader course directory from the same sources as the repository edition (see
build.py for what goes where), so that nbgrader's own commands run from DIR:

    nbgrader generate_assignment 03-atencion-causal   learner notebooks: no solution, no hidden test
    nbgrader autograde 03-atencion-causal             submitted/<student>/03-atencion-causal/*.ipynb
    nbgrader generate_feedback 03-atencion-causal     feedback/<student>/...: each check's outcome

Each check of course.yml is one autograder test cell worth its points (nbgrader's grade_id is
the check's id), or 0 of 0 where the assignment is generated on a machine that cannot run it
(gpu-parity without CUDA), as `autograder grade` counts it there. Its hidden code asks
the same hidden graders as `autograder grade`, in a separate trusted process, for the files
the learner's cells make (kernel.py), so a notebook earns exactly the points `autograder grade`
gives the same code.

    sources.py   a lesson file <-> notebook cells (the first line of a cell names its file)
    build.py     the course directory and each lesson's source notebook, put together from
    readme.py    what a notebook takes from the lesson's README,
    cells.py     nbgrader's cells (a file as code cells, the checks' test cells) and
    practice_cells.py  the practice tests' cells and the cell that runs them
    hooks.py     nbgrader's side (imported by nbgrader_config.py): learner stubs like
                 exercises/, the checks that cannot run here worth 0, untouched test cells
                 not reported as changed, and feedback without the hidden code
    feedback.html.j2  the feedback page: nbgrader's, in the notebook's language, each test
                 cell named after its check and TODO
    kernel.py    what the hidden test cells run in the notebook's kernel
    practice.py  what the visible practice cell (`comprobar()`) runs in the learner's kernel:
                 the lesson's practice tests on the learner's cells; copied into the notebook

Every text, the instructor's as well as the learner's, comes from the catalogs
(messages/<lang>/notebooks.yml), in the notebooks' language (--lang, else the course's): the
command's own lines (notebooks.build.*) and the lines the nbgrader hooks log while nbgrader
runs (notebooks.log.*). nbgrader's own log lines ("Copying ...", "Converting notebook ...") are
nbgrader's, in English. The one exception is an error in a lesson's solution files, reported in
the words of `autograder stubs` (a maintainer's tool, in English).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["add_parser", "main"]


def add_parser(subparsers) -> None:
    from autograder.core.results import message  # help texts are catalog messages (messages/<lang>/cli.yml)

    parser = subparsers.add_parser(
        "notebooks", help=message("cli.notebooks.help"), description=message("cli.notebooks.description")
    )
    parser.add_argument(
        "lessons", nargs="*", metavar=message("cli.metavar.lesson"), help=message("cli.lessons")
    )
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar=message("cli.metavar.dir"),
        help=message("cli.notebooks.out"),
    )
    parser.add_argument("--lang", choices=("es", "en"), default=None, help=message("cli.notebooks.lang"))
    parser.add_argument("--force", action="store_true", help=message("cli.notebooks.force"))


def main(course, args: argparse.Namespace) -> int:
    from autograder.core import i18n
    from autograder.core.manifest import find_course_file
    from autograder.course.notebooks.build import NotebookBuildError, build_course_dir
    from autograder.course.stubs import StubError

    lessons = [course.lesson(key) for key in args.lessons] if args.lessons else list(course.lessons)
    course_file = Path(args.course) if getattr(args, "course", None) else find_course_file()
    lang = args.lang or course.language
    try:
        report = build_course_dir(
            course,
            lessons,
            args.out,
            course_file=course_file,
            lang=lang,
            force=args.force,
        )
    except (NotebookBuildError, StubError, ValueError) as exc:
        # A lesson's sources are incomplete or DIR holds an earlier build: nothing was written.
        # (A StubError's words are `autograder stubs`' own, the maintainer's, in English.)
        said = exc.text(lang) if isinstance(exc, NotebookBuildError) else str(exc)
        print(f"autograder notebooks: {said}", file=sys.stderr)
        if not args.lessons and isinstance(exc, (StubError, ValueError)):
            print(
                "autograder notebooks: "
                + i18n.translate("notebooks.build.name_lessons", lang, out=str(args.out)),
                file=sys.stderr,
            )
        return 2
    print(
        i18n.translate(
            "notebooks.build.written",
            lang,
            out=str(report.out),
            assignments=len(report.assignments),
            names=", ".join(report.assignments),
            written=len(report.written),
            unchanged=len(report.unchanged),
            removed=len(report.removed),
        )
    )
    print(i18n.translate("notebooks.build.next", lang, out=str(report.out), example=report.assignments[0]))
    return 0
