"""`autograder regrade`: queues the graded submissions again with the course's current graders,
on the regrading lane (the instructor's choice when the graders changed mid-term: nothing
regrades by itself).

    autograder --course course.yml regrade [--data DIR | --database-url URL] [--lessons L ...]
        [--learners ID ...] [--dry-run]

The graders are those of --course and --lessons (as `autograder serve` is started with them:
their hash must be the service's and its workers'). Every graded submission (done or error) with
no result of those graders is queued again on the regrade lane (Store.queue_regrade); a worker
always takes a waiting push first, so a regrade never delays a learner's push, and each old
result is kept beside the new one (the page, the verdict and the export show the current one:
that of the submission's graders). --learners limits it to those learners; --dry-run only says
how many would be queued. The database is --database-url, else $AUTOGRADER_SERVE_DATABASE_URL,
else the SQLite store in --data ($AUTOGRADER_SERVE_DATA, default ./servicio) as `serve` finds it.
The running service's workers grade them (nothing else to start).

Exit status: 0; 2 for a database that cannot be opened or a lesson not in course.yml.
"""

from __future__ import annotations

import sys


def add_parser(sub) -> None:
    from autograder.core.results import message
    from autograder.service.config import add_store_options

    parser = sub.add_parser(
        "regrade", help=message("service.regrade.help"), description=message("service.regrade.description")
    )
    add_store_options(
        parser,
        data_help=message("service.serve.opt_data"),
        database_url_help=message("service.serve.opt_database_url"),
    )
    parser.add_argument(
        "--lessons",
        nargs="+",
        default=None,
        metavar=message("cli.metavar.lesson"),
        help=message("service.regrade.opt_lessons"),
    )
    parser.add_argument(
        "--learners", nargs="+", default=None, metavar="ID", help=message("service.regrade.opt_learners")
    )
    parser.add_argument("--dry-run", action="store_true", help=message("service.regrade.opt_dry_run"))


def main(course, args) -> int:
    from autograder.cohort.outputs import Say
    from autograder.core import i18n, neutral
    from autograder.core.results import message
    from autograder.service.config import store_url
    from autograder.service.store import Store
    from autograder.service.worker import graders_hash

    say = Say(args.lang or course.language)

    def refuse(key: str, **params) -> int:
        text = i18n.localize(message(key, **params), say.lang)
        print(f"autograder regrade: {neutral.terminal(text)}", file=sys.stderr)
        return 2

    try:
        lessons = [course.lesson(key) for key in args.lessons] if args.lessons else list(course.lessons)
    except Exception:  # noqa: BLE001 - a lesson not in course.yml
        return refuse("service.workercmd.no_lesson", lesson=" ".join(args.lessons))
    current = graders_hash(course, lessons, course.language)
    url = store_url(args)
    try:
        store = Store(url)
        store.create()
    except Exception as exc:  # noqa: BLE001 - a database that cannot be opened: said, exit 2
        return refuse(
            "service.workercmd.cannot_reach",
            detail=str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__,
        )
    try:
        if args.dry_run:
            count = (
                store.graded_by_others(current)
                if not args.learners
                else _count(store, current, args.learners)
            )
            say.out("service.regrade.would", count=count, graders=current[:12])
        else:
            count = store.queue_regrade(current, learners=args.learners)
            say.out("service.regrade.queued", count=count, graders=current[:12])
    finally:
        store.close()
    return 0


def _count(store, current: str, learners) -> int:
    wanted = set(learners)
    return sum(
        1
        for submission in store.submissions()
        if submission.learner in wanted
        and submission.state in ("done", "error")
        and all(result.graders_hash != current for result in store.results_of(submission.id))
    )
