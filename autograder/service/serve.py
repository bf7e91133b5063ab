"""`autograder serve`: the grading service in one command.

    autograder serve --roster FILE --public-url URL [options: see service/config.py]
    autograder serve --roster FILE --export DIR

The first form starts the app (uvicorn on --host:--port, 127.0.0.1:8000 by default), the
fetcher (service/archiver.py: the one part holding the GitHub credential; it fetches each
submitted commit and stores its files with the submission as a bounded archive) and the workers
(service/worker.run_workers, in a child process), over SQLite in --data by default: nothing else
to set up. At start it says how many graded submissions were graded by other graders than the
course's current ones (nothing regrades by itself: `autograder regrade` does, on the regrading
lane), and submissions still waiting are to be graded with the current graders. Ctrl-C
(SIGINT) or SIGTERM stops them all: the app stops taking requests,
the workers stop (a grading in flight is left to its lease: the next start grades it again), and
the command exits 0. A worker process that dies is started again, and the one child dies with
the command even when the command is killed (Linux: PR_SET_PDEATHSIG), so nothing grades on
alone. `--workers 0` runs the app and the fetcher only (workers elsewhere: `autograder worker`, which
needs only the queue and the database).
With deadlines (course.yml's term block, the roster's extensions), the workers keep the last
push before each due date and each late period's end (+ the grace) from being superseded by a
newer one (deadline_boundaries): the submission that counts for the term grade is graded.

The second form writes the nbgrader gradebook, grades.csv, cohort.csv, the report and the LMS
files into DIR, made now from the store (service/export.py, the term grade with deadlines); it
needs no public URL and starts nothing.

Exit status: 0 after a clean stop or export; 2 for a configuration the service must not start
with (the message names the option), a roster that cannot be read (or an extension course.yml
cannot take), or a port already taken.
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

from autograder.cohort.outputs import Say
from autograder.core import i18n, neutral
from autograder.core.manifest import Course
from autograder.core.results import message

# The [service] extra (pyproject.toml): what `serve` needs beyond a learner's install.
EXTRA = ("starlette", "uvicorn", "sqlalchemy", "huey", "jwt", "cryptography")
RESTART_AFTER_S = (1, 2, 5, 10, 30, 60)  # waits before restarting a worker process that keeps dying
STOP_WAIT_S = 20.0  # how long the workers get to stop before they are killed


def add_parser(sub) -> None:
    from autograder.cohort.roster import add_allow_options
    from autograder.service.config import SCHEMES

    parser = sub.add_parser(
        "serve", help=message("service.serve.help"), description=message("service.serve.description")
    )
    file, folder = message("cli.metavar.file"), message("cli.metavar.dir")
    parser.add_argument(
        "--roster", type=Path, default=None, metavar=file, help=message("service.serve.opt_roster")
    )
    parser.add_argument(
        "--public-url", default=None, metavar="URL", help=message("service.serve.opt_public_url")
    )
    parser.add_argument("--issuer", default=None, metavar="URL", help=message("service.serve.opt_issuer"))
    parser.add_argument(
        "--data", type=Path, default=None, metavar=folder, help=message("service.serve.opt_data")
    )
    parser.add_argument(
        "--database-url", default=None, metavar="URL", help=message("service.serve.opt_database_url")
    )
    parser.add_argument(
        "--queue-url", default=None, metavar="URL", help=message("service.serve.opt_queue_url")
    )
    parser.add_argument(
        "--github-api", default=None, metavar="URL", help=message("service.serve.opt_github_api")
    )
    parser.add_argument(
        "--clone-url", default=None, metavar="TEMPLATE", help=message("service.serve.opt_clone_url")
    )
    add_allow_options(
        parser, message("service.serve.opt_allow_scheme"), message("service.serve.opt_allow_host"), SCHEMES
    )
    parser.add_argument(
        "--workers", type=int, default=None, metavar="N", help=message("service.serve.opt_workers")
    )
    parser.add_argument(
        "--lease", type=float, default=None, metavar="S", help=message("service.serve.opt_lease")
    )
    parser.add_argument(
        "--per-hour", type=int, default=None, metavar="N", help=message("service.serve.opt_per_hour")
    )
    parser.add_argument(
        "--max-body", type=int, default=None, metavar="BYTES", help=message("service.serve.opt_max_body")
    )
    parser.add_argument(
        "--wait", type=float, default=None, metavar="S", help=message("service.serve.opt_wait")
    )
    parser.add_argument("--host", default=None, metavar="HOST", help=message("service.serve.opt_host"))
    parser.add_argument("--port", type=int, default=None, metavar="N", help=message("service.serve.opt_port"))
    parser.add_argument(
        "--lessons",
        nargs="+",
        default=None,
        metavar=message("cli.metavar.lesson"),
        help=message("service.serve.opt_lessons"),
    )
    parser.add_argument(
        "--export", type=Path, default=None, metavar=folder, help=message("service.serve.opt_export")
    )


def main(course: Course, args) -> int:
    from autograder.core.roster import RosterError, load
    from autograder.service.config import ConfigError, from_args

    say = Say(args.lang or course.language)
    missing = next((name for name in EXTRA if importlib.util.find_spec(name) is None), None)
    if missing is not None:
        return _cannot_start(say, message("service.serve.extra_missing", module=missing))
    course_file = Path(args.course) if args.course else course.root / "course.yml"
    try:
        config = from_args(args, course_file, serving=args.export is None)
        if args.export is None:
            config.checked()
        roster = load(config.roster_file)
        # An extension course.yml cannot take (a lesson without a due date, a skipped wall time)
        # stops the command before anything is served or exported.
        from autograder.term.deadlines import check_extensions

        check_extensions(course, roster)
    except (ConfigError, RosterError) as exc:
        return _cannot_start(say, exc.text)
    if args.export is not None:
        from autograder.service.export import export

        return export(config, course, roster, args.export, say)
    return serve(config, course, roster, say)


def serve(config, course: Course, roster, say: Say) -> int:
    import uvicorn

    from autograder.service import logs
    from autograder.service.app import create_app, make_services
    from autograder.service.config import ConfigError
    from autograder.service.errors import ServiceRefusal

    try:  # JSON lines with AUTOGRADER_SERVE_LOG_FORMAT=json (logs.py), the workers' too
        log_format = logs.configure()
    except logs.LogFormatError as exc:
        return _cannot_start(say, exc.text)

    without_id = [learner.id for learner in roster.learners if learner.repository_id is None]
    if without_id:
        say.line(
            "service.serve.learners_without_id", ids=", ".join(without_id), roster=str(config.roster_file)
        )
    Path(config.data_dir).mkdir(parents=True, exist_ok=True)
    try:
        sock = _bind(config.host, config.port)
    except OSError as exc:
        return _cannot_start(
            say, message("service.serve.port_taken", host=config.host, port=config.port, detail=str(exc))
        )
    try:
        services = make_services(config, course, roster)
    except ServiceRefusal as refusal:
        sock.close()
        return _cannot_start(say, refusal.text)
    except ConfigError as exc:
        sock.close()
        return _cannot_start(say, exc.text)
    if services.lookup.credential is None:
        say.line("service.serve.no_credential")
    app = create_app(services)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,  # a request's path can hold a page key, the secret of its URL
            lifespan="off",
            server_header=False,
            log_config=logs.uvicorn_log_config(log_format),
        )
    )
    archiver = start_archiver(config, course, roster, services, say)
    workers = Supervisor(config, say) if config.workers > 0 else None
    if workers is not None:
        workers.start()
    from autograder.service.checks import start_publisher

    publisher = start_publisher(services, say)  # None without a GitHub App for check runs
    say.line(
        "service.serve.started",
        url=config.public_url,
        host=config.host,
        port=sock.getsockname()[1],
        workers=config.workers,
        database=_shown_url(config.database),
    )
    # uvicorn stops on SIGINT and SIGTERM, then raises the signal again to the handler found
    # before it: both end here as KeyboardInterrupt, a clean stop.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        if workers is not None:
            workers.stop()
        archiver.stop()
        if publisher is not None:
            publisher.stop()
        services.store.close()
        say.line("service.serve.stopped")
    return 0


def _cannot_start(say: Say, text) -> int:
    print(f"autograder serve: {neutral.terminal(i18n.localize(text, say.lang))}", file=sys.stderr)
    return 2


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _shown_url(url: str) -> str:
    """A database URL without its password, for the log."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - an odd URL is shown as the driver's name only
        return url.split(":", 1)[0]


# ------------------------------------------------------------------------------ the fetcher


def service_graders_hash(config, course: Course) -> str:
    """The graders' hash of the service's course and lessons: worker.service_graders_hash (import
    it from there: serve imports the app, which imports the live view)."""
    from autograder.service.worker import service_graders_hash as of_service

    return of_service(config, course)


def start_archiver(config, course: Course, roster, services, say: Say):
    """The fetcher threads of this process (archiver.py), after telling the instructor how many
    graded submissions other graders graded, and stamping the waiting ones with these graders."""
    from autograder.service.archiver import Archiver, ArchiverConfig
    from autograder.service.queue import wake

    current = service_graders_hash(config, course)
    services.store.restamp_waiting(current)
    others = services.store.graded_by_others(current)
    if others:
        say.line("service.serve.graded_by_others", count=others, graders=current[:12])
    lessons = [course.lesson(key) for key in config.lessons] if config.lessons else list(course.lessons)
    archiver = Archiver(
        ArchiverConfig(
            data_dir=Path(config.data_dir).resolve(),
            url_template=config.clone_url,
            allowed=config.allowed,
            boundaries=deadline_boundaries(course, roster),
            lease_s=config.lease_s,
        ),
        services.store,
        course,
        lessons,
        current,
        services.lookup.credential,
        say,
        wake=(lambda: wake(services.queue)) if services.queue is not None else None,
    )
    return archiver.start()


# ------------------------------------------------------------------------------ the workers


class Supervisor:
    """The worker process: started, started again when it dies (waiting longer each time it dies
    young), stopped with the command. Its own thread starts every child, and lives as long as
    the command serves: a child's PR_SET_PDEATHSIG follows the thread that started it."""

    def __init__(self, config, say: Say) -> None:
        self.config, self.say = config, say
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="autograder-workers", daemon=True)
        self._ctx = multiprocessing.get_context("spawn")
        self.process = None
        self._lock = threading.Lock()

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        # A child inherits this thread's signal mask, across exec: SIGINT stays blocked in it
        # until worker_main ignores it, so a Ctrl-C while it starts is no traceback there.
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        failures = 0
        while not self._stop.is_set():
            started = time.monotonic()
            with self._lock:
                if self._stop.is_set():
                    return
                self.process = self._ctx.Process(
                    target=worker_main,
                    args=(worker_config(self.config), os.getpid()),
                    name="autograder-workers",
                )
                self.process.start()
            self.process.join()
            if self._stop.is_set():
                return
            failures = 0 if time.monotonic() - started > 60 else failures + 1
            wait = RESTART_AFTER_S[min(failures, len(RESTART_AFTER_S) - 1)]
            self.say.line("service.serve.worker_died", code=self.process.exitcode, seconds=wait)
            self._stop.wait(wait)
        # The thread ends only after the command stopped the child (stop()).

    def stop(self) -> None:
        with self._lock:
            self._stop.set()
            process = self.process
        if process is not None and process.is_alive():
            # SIGTERM: Huey stops at once; a grading in flight keeps its lease, which lapses, and
            # the next start grades it again (execution is at least once, the result once).
            process.terminate()
            process.join(STOP_WAIT_S)
            if process.is_alive():
                process.kill()
                process.join()
        self._thread.join(STOP_WAIT_S)


def deadline_boundaries(course: Course, roster) -> tuple[datetime, ...]:
    """The moments the workers must not let a newer push supersede the last push before
    (store.claim's `boundaries`), from course.yml's deadlines and the roster's extensions: each
    due date + the grace (the last push on time) and each late period's end + the grace (the last
    late push accepted). So the submission that counts for the term grade is always graded,
    even when a late push came before the workers got to it. None without deadlines."""
    from autograder.term.deadlines import due_dates

    if not any(lesson.due is not None for lesson in course.lessons):
        return ()
    grace = course.term.grace
    everyone = [learner.id for learner in roster.learners] if roster is not None else []
    moments = set()
    for ident in ("", *everyone):  # "": course.yml's own dates (a learner of no extension)
        for due in due_dates(course, roster, ident).values():
            moments.update((due.due + grace, due.late_until + grace))
    return tuple(sorted(moments))


def worker_config(config):
    from autograder.core.manifest import ManifestError, load_course
    from autograder.core.roster import RosterError, load
    from autograder.service.worker import WorkerConfig

    try:  # checked when the command started; a file edited since leaves the boundaries out
        boundaries = deadline_boundaries(load_course(Path(config.course_file)), load(config.roster_file))
    except (ManifestError, RosterError, OSError):
        boundaries = ()
    return WorkerConfig(
        course_file=Path(config.course_file).resolve(),
        database_url=config.database,
        queue_url=config.queue_url,
        data_dir=Path(config.data_dir).resolve(),
        workers=config.workers,
        lease_s=config.lease_s,
        lessons=config.lessons,
        boundaries=boundaries,
    )


def worker_main(config, parent: int) -> None:
    """The child process: die with the command (even when it is killed), then the workers. The
    command stops it (SIGTERM): a Ctrl-C at the terminal, which reaches the whole process group,
    is the command's to act on while the workers start (Huey's consumer then takes SIGINT as a
    graceful stop)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the command died before the line above took effect
        return
    from autograder.service import logs
    from autograder.service.worker import run_workers

    logs.configure()  # the format was checked when the command started
    run_workers(config)
