"""`autograder similarity`: which learners' code is more alike than the cohort's, and which
repositories share commits. It reports; it never reads or changes a grade.

    autograder similarity NOTAS [SUBMISSIONS] [--lessons LESSON ...] [--template DIR ...]
                          [--z Z] [--min-pairs N] [--lang es|en]

NOTAS is a grade-all output folder (autograder/cohort/store.py): its run.json names the run's
learners and lessons, its records/<id>.json each learner's name and graded commit. The code is
not in NOTAS: it is in SUBMISSIONS, the folder grade-all was given (one folder per learner, a clone
with exercises/ inside or the exercises themselves; with --roster, where grade-all cloned them).
SUBMISSIONS may be left out when run.json records it (`submissions`). Without a run.json, every
folder of SUBMISSIONS whose name is a learner id is a learner. --lessons narrows the lessons
(default: the run's, else the course's).

The reports go to NOTAS/similarity/ (similarity.html, similarity.csv; report.py), readable by the
instructor only. How code is read: own_code.py; how pairs are compared and flagged: compare.py;
shared commits: history.py. Exit status: 0 when the reports are written (whatever they flag); 2
for unusable input (NOTAS or SUBMISSIONS not a folder, no learner, a bad option); 1 for an
internal failure.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder.cohort.roster import learners_in
from autograder.cohort.store import Store
from autograder.core import i18n
from autograder.core.manifest import Course
from autograder.core.roster import valid_learner_id
from autograder.similarity import compare, history, own_code, report


class SimilarityError(Exception):
    """Input the command cannot use: a catalog key and its parameters."""

    def __init__(self, key: str, **params) -> None:
        super().__init__(key)
        self.key, self.params = key, params


def add_parser(subparsers) -> None:
    from autograder.core.results import message  # help texts are catalog messages

    parser = subparsers.add_parser(
        "similarity", help=message("similarity.cli.help"), description=message("similarity.cli.description")
    )
    parser.add_argument(
        "notas", type=Path, metavar=message("cli.metavar.dir"), help=message("similarity.cli.notas")
    )
    parser.add_argument(
        "submissions",
        nargs="?",
        type=Path,
        default=None,
        metavar=message("cli.metavar.submissions"),
        help=message("similarity.cli.submissions"),
    )
    parser.add_argument(
        "--lessons",
        nargs="+",
        default=None,
        metavar=message("cli.metavar.lesson"),
        help=message("similarity.cli.lessons"),
    )
    parser.add_argument(
        "--template",
        action="append",
        type=Path,
        default=None,
        metavar=message("cli.metavar.dir"),
        help=message("similarity.cli.template"),
    )
    parser.add_argument(
        "--z", type=float, default=compare.Z_THRESHOLD, metavar="Z", help=message("similarity.cli.z")
    )
    parser.add_argument(
        "--min-pairs",
        type=int,
        default=compare.MIN_PAIRS,
        metavar="N",
        help=message("similarity.cli.min_pairs"),
    )
    parser.add_argument("--lang", choices=i18n.LANGUAGES, default=None, help=message("similarity.cli.lang"))


def main(course: Course, args: argparse.Namespace) -> int:
    lang = args.lang or course.language
    try:
        result = run(course, args, lang)
    except SimilarityError as exc:
        say(lang, exc.key, **exc.params)
        return 2
    try:
        paths = report.write(result, Path(args.notas), lang)
    except OSError as exc:
        say(
            lang, "similarity.error.unwritable", folder=str(Path(args.notas) / report.FOLDER), detail=str(exc)
        )
        return 2
    flagged = result.flagged()
    say(
        lang,
        "similarity.summary",
        pairs=len(flagged),
        lessons=len({pair.lesson for pair in flagged}),
        repositories=len(result.shared),
    )
    for path in paths:
        say(lang, "similarity.written", path=str(path))
    return 0


def say(lang: str, key: str, **params) -> None:
    print(f"autograder similarity: {i18n.translate(key, lang, **params)}", file=sys.stderr)


def run(course: Course, args: argparse.Namespace, lang: str) -> report.Result:
    """Everything but writing: the cohort read, compared and flagged."""
    notas = Path(args.notas)
    if not notas.is_dir():
        raise SimilarityError("similarity.error.not_a_folder", folder=str(notas))
    if args.z <= 0:
        raise SimilarityError("similarity.error.bad_z", z=args.z)
    if args.min_pairs < 1:
        raise SimilarityError("similarity.error.bad_min_pairs", n=args.min_pairs)
    store = Store(notas)
    run_info = store.read_run() or {}
    submissions = args.submissions
    if submissions is None and isinstance(run_info.get("submissions"), str):
        submissions = Path(run_info["submissions"])
    if submissions is None:
        raise SimilarityError("similarity.error.no_submissions", notas=str(notas))
    if not Path(submissions).is_dir():
        raise SimilarityError("similarity.error.not_a_folder", folder=str(submissions))
    submissions = Path(submissions)

    ids = learner_ids(run_info, submissions)
    if not ids:
        raise SimilarityError("similarity.error.empty_cohort", notas=str(notas), submissions=str(submissions))
    names, commits = {}, {}
    for learner in ids:
        record = store.read_record(learner)
        if record is not None:
            names[learner] = " ".join(part for part in (record.first_name, record.last_name) if part)
            commits[learner] = record.commit
    keys = args.lessons or [key for key in run_info.get("lessons", []) if isinstance(key, str)]
    lessons = [course.lesson(key) for key in keys] if keys else list(course.lessons)

    results = []
    for lesson in lessons:
        stubs = own_code.stub_texts(course, lesson)
        owns = {learner: own_code.own_code(learner, submissions / learner, lesson, stubs) for learner in ids}
        found = compare.compare_lesson(
            lesson.id,
            list(owns.values()),
            stubs,
            threshold=args.z,
            min_pairs=args.min_pairs,
            shown=report.TOP_UNFLAGGED,
        )
        title = lesson.title.get(lang) or lesson.title.get(i18n.DEFAULT_LANGUAGE) or lesson.slug
        results.append(
            report.LessonResult(lesson.id, title, owns, found.pairs, found.distribution, found.left_out)
        )

    histories = [history.history(learner, submissions / learner, commits.get(learner)) for learner in ids]
    hand_out, problems = history.template_commits(list(args.template or []))
    shared, common = history.shared_commits(histories, hand_out)
    for results_lesson in results:
        for pair in results_lesson.pairs:
            pair.shared_commits = shared.get((pair.a, pair.b), [])
    return report.Result(
        course=course.name,
        names=names,
        lessons=results,
        shared=shared,
        histories={h.learner: h.problem for h in histories},
        hand_out_commits=len(hand_out),
        common_commits=len(common),
        problems=problems,
    )


def learner_ids(run_info: dict, submissions: Path) -> list[str]:
    """The run's learners (run.json), else the learner folders of SUBMISSIONS; an id that could
    not be a folder name (a run.json edited by hand) is never joined to a path."""
    listed = run_info.get("learners")
    if isinstance(listed, list):
        return sorted(
            {learner for learner in listed if isinstance(learner, str) and valid_learner_id(learner)}
        )
    learners, _ = learners_in(submissions)
    return [learner.id for learner in learners]
