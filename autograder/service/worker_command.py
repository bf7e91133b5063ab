"""`autograder worker`: grades the service's submissions on any machine that reaches the service's
queue and store, sharing no filesystem with it and holding no GitHub credential.

    autograder --course course.yml worker --database-url postgresql+psycopg://... \\
        --queue-url redis://... [--workers N] [--lease S] [--data DIR] [--lessons L ...] \\
        [--max-attempts K]

Each option also comes from the environment, $AUTOGRADER_WORKER_<OPTION> (e.g.
AUTOGRADER_WORKER_DATABASE_URL), and the database and queue URLs also from serve's own
$AUTOGRADER_SERVE_DATABASE_URL / $AUTOGRADER_SERVE_QUEUE_URL (one environment for both commands);
the command line first. The course (--course) must be the service's, with the same hidden
graders and --lessons: the worker grades only submissions recorded with its graders' hash and
refuses the others, saying so (worker.py). --data is this worker's own scratch folder (each
submission's files are unpacked there from the archive the service stored, then removed).
Without --queue-url the worker finds work by its timer (every third of a lease) instead of
being woken. The GitHub credentials in its environment, if any, are dropped at start: nothing
of the worker needs them.

Exit status: 0 after SIGINT/SIGTERM; 1 when its grading processes cannot start (worker.py);
2 for a setting it cannot start with (the message names it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ENV_PREFIX = "AUTOGRADER_WORKER_"
SHARED_PREFIX = "AUTOGRADER_SERVE_"  # the database and queue URLs, as serve reads them
DEFAULT_DATA = Path("corrector")


def add_parser(sub) -> None:
    from autograder.core.results import message

    parser = sub.add_parser(
        "worker", help=message("service.workercmd.help"), description=message("service.workercmd.description")
    )
    parser.add_argument(
        "--database-url", default=None, metavar="URL", help=message("service.workercmd.opt_database_url")
    )
    parser.add_argument(
        "--queue-url", default=None, metavar="URL", help=message("service.workercmd.opt_queue_url")
    )
    parser.add_argument(
        "--workers", type=int, default=None, metavar="N", help=message("service.workercmd.opt_workers")
    )
    parser.add_argument(
        "--lease", type=float, default=None, metavar="S", help=message("service.workercmd.opt_lease")
    )
    parser.add_argument(
        "--max-attempts",
        type=int,
        default=None,
        metavar="K",
        help=message("service.workercmd.opt_max_attempts"),
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=None,
        metavar=message("cli.metavar.dir"),
        help=message("service.workercmd.opt_data"),
    )
    parser.add_argument(
        "--lessons",
        nargs="+",
        default=None,
        metavar=message("cli.metavar.lesson"),
        help=message("service.workercmd.opt_lessons"),
    )


class _Refused(Exception):
    def __init__(self, key: str, **params) -> None:
        super().__init__(key)
        self.key, self.params = key, params


def setting(args, option: str, environ=os.environ, *, shared: bool = False):
    """The option's value: the command line, then $AUTOGRADER_WORKER_<OPTION>, then (`shared`)
    serve's $AUTOGRADER_SERVE_<OPTION>; None when none gives it."""
    given = getattr(args, option.replace("-", "_"), None)
    if given is not None:
        return given
    names = [ENV_PREFIX + option.replace("-", "_").upper()]
    if shared:
        names.append(SHARED_PREFIX + option.replace("-", "_").upper())
    for name in names:
        value = environ.get(name, "").strip()
        if value:
            return value
    return None


def config_from(course, args, environ=os.environ):
    """The WorkerConfig the arguments and environment give, or _Refused."""
    from autograder.service.worker import WorkerConfig

    database = setting(args, "database-url", environ, shared=True)
    if not database:
        raise _Refused("service.workercmd.missing", option="--database-url", env=ENV_PREFIX + "DATABASE_URL")

    def number(option: str, default, kind, low):
        value = setting(args, option, environ)
        try:
            value = kind(default if value is None else value)
        except (TypeError, ValueError):
            raise _Refused("service.serve.not_a_number", option=f"--{option}", value=value) from None
        if value < low:
            raise _Refused("service.serve.bad_number", option=f"--{option}", value=value, low=low)
        return value

    lessons = getattr(args, "lessons", None)
    if lessons is None and setting(args, "lessons", environ):
        lessons = setting(args, "lessons", environ).replace(",", " ").split()
    for key in lessons or ():
        try:
            course.lesson(key)
        except Exception:  # noqa: BLE001 - the manifest's own error names the lesson; ours says the option
            raise _Refused("service.workercmd.no_lesson", lesson=key) from None
    return WorkerConfig(
        course_file=(
            Path(args.course) if getattr(args, "course", None) else course.root / "course.yml"
        ).resolve(),
        database_url=database,
        queue_url=setting(args, "queue-url", environ, shared=True),
        data_dir=Path(setting(args, "data", environ) or DEFAULT_DATA).resolve(),
        workers=number("workers", 1, int, 1),
        lease_s=number("lease", 30.0, float, 1),
        max_attempts=number("max-attempts", 3, int, 1),
        lessons=tuple(lessons) if lessons else None,
        boundaries=None,  # the service supersedes when it fetches: a worker has no roster
    )


def main(course, args) -> int:
    from autograder.cohort.outputs import Say
    from autograder.core import i18n, neutral
    from autograder.core.results import message
    from autograder.service.credentials import APP_ID, APP_INSTALLATION, APP_KEY, TOKEN_VARIABLES
    from autograder.service.serve import EXTRA

    say = Say(args.lang or course.language)

    def refuse(key: str, **params) -> int:
        text = i18n.localize(message(key, **params), say.lang)
        print(f"autograder worker: {neutral.terminal(text)}", file=sys.stderr)
        return 2

    import importlib.util

    missing = next((name for name in EXTRA if importlib.util.find_spec(name) is None), None)
    if missing is not None:
        return refuse("service.serve.extra_missing", module=missing)
    try:
        config = config_from(course, args)
    except _Refused as refused:
        return refuse(refused.key, **refused.params)
    for name in (*TOKEN_VARIABLES, APP_ID, APP_KEY, APP_INSTALLATION):
        os.environ.pop(name, None)  # nothing of a worker needs GitHub: its children never see them
    try:
        Path(config.data_dir).mkdir(parents=True, exist_ok=True)
        from autograder.service.store import Store

        probe = Store(config.database_url)
        try:
            probe.create()
        finally:
            probe.close()
        from autograder.service.queue import make_queue

        make_queue(config.queue_url, Path(config.data_dir))
    except Exception as exc:  # noqa: BLE001 - a database or queue that cannot be reached: said, exit 2
        return refuse(
            "service.workercmd.cannot_reach",
            detail=str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__,
        )
    from autograder.service import logs
    from autograder.service.worker import run_workers

    try:  # JSON lines with AUTOGRADER_SERVE_LOG_FORMAT=json, as serve's (logs.py)
        logs.configure()
    except logs.LogFormatError as exc:
        return refuse(exc.text.key, **exc.text.params)
    run_workers(config)
    return 0
