"""`autograder grade-all`: an instructor grades a whole cohort.

    autograder grade-all SUBMISSIONS --out DIR [--jobs N] [--shard I/N] [--roster FILE]
                         [--allow-scheme SCHEME ...] [--allow-host HOST ...]
                         [--lessons LESSON ...] [--seed N] [--lang es|en] [--learner-timeout S]
                         [--snapshot | --at "YYYY-MM-DD HH:MM"]
    autograder grade-all --merge DIR [DIR ...] --out DIR [--roster FILE]

SUBMISSIONS holds one folder per learner: a clone of their repository (with exercises/ inside)
or just its exercises/. With --roster (autograder/cohort/roster.py) the repositories are cloned or
updated there first, from the schemes and hosts --allow-scheme and --allow-host allow (default:
https on github.com). Every learner is graded with the same engine call, trust boundary and seed
as `autograder grade --submission <their exercises> --seed <the run's seed>` (nothing below the
learner's folder that is a symlink is followed, not even their exercises/), by N long-lived
grading processes (autograder/cohort/pool.py). DIR receives one result per learner, the nbgrader
gradebook and CSVs (autograder/cohort/gradebook.py) and the cohort report (autograder/cohort/report.py); see
autograder/cohort/store.py for its layout and for how an interrupted run resumes.

Submission time: grade-all's own clock, never the learner's. DIR/observations.jsonl
(autograder/cohort/observations.py), kept across runs, holds when grade-all first saw each
learner's submission: a commit it fetched from the roster's repository (the moment that fetch
finished), or, for a folder it did not fetch (no roster: a folder without git, or a clone made by
someone else), the hash of the files it graded (the moment it read them). A submission seen
before keeps its first time, whatever run sees it again; a new commit or new files get the time
they were first seen. Each learner's record, grades.csv, cohort.csv and the gradebook are
stamped with the first sighting of what was graded; a commit's dates and files' times are never
read. A line of the log that cannot be read is reported (file and line) and skipped.

Deadlines (course.yml's term block, the roster's extensions; autograder/term/): which submission
counts. `--snapshot` (meant for a scheduled run at a deadline) fetches every roster learner and
records their head at that moment in the observation log, with GitHub's push times from the
repository activity API where a token allows (AUTOGRADER_ROSTER_TOKEN, GITHUB_TOKEN or GH_TOKEN);
it grades nothing. `--at "YYYY-MM-DD HH:MM"` (course time zone) grades each learner's commit as
of that moment, from what the log recorded (their latest fetch, snapshot or push at or before it),
and names the learners with no record before it. With deadlines, every run then works out each
learner's counting submission per lesson (autograder/cohort/term_grades.py), grades the counting
ones never graded (their commit checked out on its own), and writes the term grade into
grades.csv and cohort.csv (late ones with the penalty) and DIR/term.json. Moving a deadline or an
extension and running again recomputes them (a deadline is no part of the grading fingerprint:
nothing is regraded for it), and a submission graded before under the same fingerprint is not
graded again (DIR/attempts/ keeps each one's result).

--shard I/N grades a stable I-th of N parts of the learners (by a hash of their id), so N
machines can share a cohort; --merge (autograder/cohort/merge.py) then combines the N output
folders into one, after checking that they are the N shards of the same run (same seed, lessons,
graders and engine). Each shard keeps its own observation log; --merge appends to the merged
folder's log what the shards saw and it did not (the earliest time of each sighting wins) and
stamps the merged records from it.

Exit status: 0 when every learner of the run has a result (a learner whose grading failed has
an error result, listed in the report); 2 for unusable input (roster, folders, shards); 1 for
an internal failure; 130 when interrupted with Ctrl-C (SIGINT), 143 with SIGTERM (a scheduler's
stop): what was graded is kept, and grade-all says so and that running the same command again
resumes.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from autograder.cohort import observations
from autograder.cohort.merge import merge
from autograder.cohort.observations import ObservationLog, Sighting
from autograder.cohort.outputs import Say, error_result_json, load_log, publish, report_failed_outputs
from autograder.cohort.roster import (
    GIT_OPTIONS,
    GIT_TIMEOUT,
    Allowed,
    GitError,
    Learner,
    add_allow_options,
    fetch,
    git_environment,
    learners_in,
    read_roster,
    redact_url,
)
from autograder.cohort.store import (
    RESULTS,
    BatchError,
    Record,
    Store,
    content_hash,
    grading_fingerprint,
    learner_key,
    private_folder,
    write_json,
)
from autograder.cohort.term_grades import core_roster, count_term, has_deadlines
from autograder.core import i18n
from autograder.core.history import parse_time
from autograder.core.manifest import Course, Lesson
from autograder.sandbox import cpu_clock

WORKER_START_ALLOWANCE = 60.0  # seconds per lesson on top of its checks' timeouts
# A host name or an IP address, nothing more: no scheme, user, port or path.
_HOST = re.compile(r"[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?|\[?[0-9a-f:.]+\]?")


def add_parser(subparsers) -> None:
    from autograder.core.results import message  # help texts are catalog messages (messages/<lang>/cli.yml)

    parser = subparsers.add_parser(
        "grade-all", help=message("cli.grade_all.help"), description=message("cli.grade_all.description")
    )
    parser.add_argument(
        "submissions",
        nargs="?",
        type=Path,
        metavar=message("cli.metavar.submissions"),
        help=message("cli.grade_all.submissions"),
    )
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar=message("cli.metavar.dir"),
        help=message("cli.grade_all.out"),
    )
    parser.add_argument("--jobs", type=int, default=None, metavar="N", help=message("cli.grade_all.jobs"))
    parser.add_argument("--shard", default=None, metavar="I/N", help=message("cli.grade_all.shard"))
    parser.add_argument(
        "--roster",
        type=Path,
        default=None,
        metavar=message("cli.metavar.file"),
        help=message("cli.grade_all.roster"),
    )
    add_allow_options(parser, message("cli.grade_all.allow_scheme"), message("cli.grade_all.allow_host"))
    parser.add_argument(
        "--allow-unisolated", action="store_true", help=message("cli.grade_all.allow_unisolated")
    )
    parser.add_argument(
        "--lessons",
        nargs="+",
        default=None,
        metavar=message("cli.metavar.lesson"),
        help=message("cli.grade_all.lessons"),
    )
    parser.add_argument("--seed", type=int, default=None, help=message("cli.grade_all.seed"))
    parser.add_argument("--lang", choices=i18n.LANGUAGES, default=None, help=message("cli.grade_all.lang"))
    parser.add_argument(
        "--learner-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help=message("cli.grade_all.learner_timeout"),
    )
    parser.add_argument("--snapshot", action="store_true", help=message("cli.grade_all.snapshot"))
    parser.add_argument(
        "--at", default=None, metavar=message("cli.grade_all.at_metavar"), help=message("cli.grade_all.at")
    )
    parser.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        default=None,
        metavar=message("cli.metavar.dir"),
        help=message("cli.grade_all.merge"),
    )


def main(course: Course, args: argparse.Namespace) -> int:
    lang = args.lang or course.language
    try:
        with _stopped_by_sigterm():
            if args.merge:
                return merge(course, args, lang)
            return _grade_all(course, args, lang)
    except BatchError as exc:
        print(f"autograder grade-all: {i18n.localize(exc.text, lang)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        return _interrupted(args, lang, getattr(exc, "signum", signal.SIGINT))


class Interrupted(KeyboardInterrupt):
    """SIGTERM, met like Ctrl-C: every cleanup that runs for Ctrl-C (the grading processes
    stopped, the progress bar closed) runs for it too."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _stopped_by_sigterm():
    """SIGTERM raises Interrupted in this (the main) thread while grade-all runs, instead of
    ending the process without a word (Python's default)."""

    def stop(signum, frame) -> None:
        raise Interrupted(signum)

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread (a test calling main()): nothing to catch
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupted(args: argparse.Namespace, lang: str, signum: int) -> int:
    """What an interrupted run says: how many results it keeps, and that the same command
    resumes (autograder/cohort/store.py: a learner whose result is whole is not graded again)."""
    results = Path(args.out) / RESULTS if getattr(args, "out", None) else None
    kept = sum(1 for _ in results.glob("*.json")) if results is not None and results.is_dir() else 0
    Say(lang).line(
        "batch.interrupted",
        signal=signal.Signals(signum).name,
        out=str(args.out),
        kept=kept,
    )
    return 128 + int(signum)


# ------------------------------------------------------------------------------ options


def parse_shard(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and 1 <= int(index) <= int(count)):
        raise BatchError("batch.bad_shard", shard=text)
    return int(index), int(count)


def shard_of(learner: str, count: int) -> int:
    """The shard (1..count) a learner belongs to: a hash of the id alone, so that every machine
    computes the same partition from the same roster or folder, whatever else is in it."""
    digest = hashlib.sha256(learner.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def default_learner_timeout(lessons: list[Lesson]) -> float:
    # Each check may run up to its wall-clock bound (a loaded machine stretches checks, and
    # the budgets are CPU seconds): the learner's whole grading may take their sum.
    return sum(
        sum(cpu_clock.wall_bound(spec.timeout) for spec in lesson.checks) + WORKER_START_ALLOWANCE
        for lesson in lessons
    )


def _default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def _check_inputs(args: argparse.Namespace) -> None:
    if args.submissions is None:
        raise BatchError("batch.no_submissions")
    if args.jobs is not None and args.jobs < 1:
        raise BatchError("batch.bad_jobs", jobs=args.jobs)
    if args.learner_timeout is not None and args.learner_timeout <= 0:
        raise BatchError("batch.bad_timeout", seconds=args.learner_timeout)
    if args.roster is None and not args.submissions.is_dir():
        raise BatchError("batch.not_a_folder", folder=str(args.submissions))
    if args.roster is not None and not args.roster.is_file():
        raise BatchError("batch.roster_unreadable", where=str(args.roster), detail="not a file")
    out, submissions = args.out.resolve(), args.submissions.resolve()
    if out == submissions or submissions in out.parents:
        raise BatchError("batch.out_inside", out=str(args.out), submissions=str(args.submissions))
    if args.out.exists() and not args.out.is_dir():
        raise BatchError("batch.not_a_folder", folder=str(args.out))
    if importlib.util.find_spec("nbgrader") is None:
        raise BatchError("batch.nbgrader_missing")
    allowed(args)
    if not args.snapshot:  # a snapshot fetches and records; it runs no learner's code
        _check_isolation(args)


def _check_isolation(args: argparse.Namespace) -> None:
    """A cohort's learners can attack each other and the instructor: refuse to run their code
    unwalled unless told to (--allow-unisolated)."""
    from autograder.sandbox import isolation

    walls = isolation.probe()
    if not walls["official"] and not args.allow_unisolated:
        raise BatchError(
            "batch.unisolated",
            missing=", ".join(walls["missing"]) or "-",
            landlock=walls.get("landlock_abi", 0),
        )


def allowed(args: argparse.Namespace) -> Allowed:
    """Where the roster's repositories may be, from --allow-scheme and --allow-host."""
    default = Allowed()
    hosts = []
    for host in args.allow_host or default.hosts:
        if not _HOST.fullmatch(host.lower()):
            raise BatchError("batch.bad_host", host=host)
        hosts.append(host.lower().strip("[]"))  # compared as url_origin gives it: [::1] is ::1
    return Allowed(tuple(dict.fromkeys(args.allow_scheme or default.schemes)), tuple(dict.fromkeys(hosts)))


# ------------------------------------------------------------------------------ grading


def _grade_all(course: Course, args: argparse.Namespace, lang: str) -> int:
    _check_inputs(args)
    shard = parse_shard(args.shard)
    at = parse_at(args.at, course) if args.at is not None else None
    if args.snapshot and (at is not None or args.roster is None):
        raise BatchError("term_cohort.snapshot_needs_roster" if at is None else "term_cohort.snapshot_and_at")
    lessons = [course.lesson(key) for key in args.lessons] if args.lessons else list(course.lessons)
    say = Say(lang)
    learners = _learners(args, say)  # reads the roster or the folder; nothing is written before
    if has_deadlines(course, lessons):  # a typo in an extension stops the run before any grading
        from autograder.core.roster import RosterError as ExtensionError
        from autograder.term.deadlines import check_extensions

        try:
            check_extensions(course, core_roster(args))
        except ExtensionError as exc:
            raise BatchError(exc.text.key, **exc.text.params) from None
    if shard is not None:
        learners = [learner for learner in learners if shard_of(learner.id, shard[1]) == shard[0]]
    store = Store(args.out)
    private_folder(store.root)
    store.remove_leftovers()
    log = load_log(store.root, say)
    seed = args.seed if args.seed is not None else (store.read_run() or {}).get("seed")
    if not isinstance(seed, int):
        seed = random.SystemRandom().randrange(2**31)
    fetched: dict[str, datetime] = {}
    if args.roster is not None and learners:
        args.submissions.mkdir(parents=True, exist_ok=True)
        say.line("batch.fetching", n=len(learners))
        fetched = _fetch(learners, jobs=min(8, args.jobs or _default_jobs()), allowed=allowed(args))
    if args.snapshot:
        return _snapshot(learners, fetched, log, say, args)
    as_of: dict[str, Sighting] = {}
    scratch = None
    if at is not None:
        scratch = Path(tempfile.mkdtemp(prefix="autograder-at-"))
        os.chmod(scratch, 0o755)  # as SUBMISSIONS: the grading processes read the files from here
        as_of = _as_of(learners, log, at, scratch, allowed(args) if args.roster else None, say, args.at)
    try:
        return _run(course, args, lang, lessons, learners, store, log, seed, shard, fetched, as_of, at, say)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _run(
    course: Course,
    args: argparse.Namespace,
    lang: str,
    lessons: list[Lesson],
    learners: list[Learner],
    store: Store,
    log: ObservationLog,
    seed: int,
    shard: tuple[int, int] | None,
    fetched: dict[str, datetime],
    as_of: dict[str, Sighting],
    at: datetime | None,
    say: Say,
) -> int:
    run = {
        "course": course.name,
        "language": lang,
        "seed": seed,
        "lessons": [lesson.id for lesson in lessons],
        "fingerprint": grading_fingerprint(course, lessons, seed=seed, lang=lang),
        "shard": None if shard is None else f"{shard[0]}/{shard[1]}",
        "learners": [learner.id for learner in learners],
        "submissions": str(args.submissions.resolve()),  # for `autograder similarity NOTAS`
        "at": None if at is None else observations.format_time(at),  # --at: --merge counts as of it too
    }
    store.write_run(run)

    todo, unchanged, failed = _triage(course, lessons, learners, store, run, say, log, fetched, as_of)
    jobs = min(args.jobs or _default_jobs(), max(1, len(todo)))
    say.line("batch.start", learners=len(learners), todo=len(todo), same=unchanged, jobs=jobs, seed=seed)
    counts = _grade(course, lessons, todo, store, run, jobs, args.learner_timeout, say)
    if counts is None:
        return 1
    term = None
    if has_deadlines(course, lessons) and not args.snapshot:
        term = _term(course, lessons, learners, store, run, log, args, at, say)
        if term is None:
            return 1
    failures = publish(course, store, run, lang, term=term)
    say.out("batch.summary", graded=counts[0], same=unchanged, errors=failed + counts[1], out=str(args.out))
    return report_failed_outputs(say, store, failures)


# ------------------------------------------------------------------------------ deadlines

# Activity that leaves `after` on the branch (as the service's github_lookup): branch_deletion
# leaves nothing.
MOVES_REF = ("push", "force_push", "branch_creation", "pr_merge", "merge_queue_merge")
_REPO_PATH = re.compile(r"([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/?$")
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def parse_at(text: str, course: Course) -> datetime:
    """--at's wall-clock time in the course's time zone (as course.yml's due dates: a time the
    clocks skip is refused, one they show twice is the first), as an aware UTC instant."""
    from autograder.core.manifest import WallTimeError, wall_time

    try:
        return wall_time(text.strip(), course.timezone)
    except WallTimeError as exc:
        if exc.kind == "format":
            raise BatchError("term_cohort.bad_at", at=text, zone=course.timezone) from None
        raise BatchError(exc.text.key, **exc.text.params) from None


def _snapshot(
    learners: list[Learner], fetched: dict[str, datetime], log: ObservationLog, say: Say, args
) -> int:
    """--snapshot: each fetched learner's head, at the moment their fetch finished, and GitHub's
    push times where a token allows, into the observation log. Grades nothing."""
    heads = []
    for learner in learners:
        if learner.problem is not None:
            kind, detail = learner.problem
            say.line(f"batch.problem_{kind}", id=learner.id, detail=detail)
        elif learner.commit and learner.id in fetched:
            heads.append(Sighting(learner.id, "snapshot", learner.commit, None, fetched[learner.id]))
    pushes = _push_activity(learners, say)
    try:
        log.record([*heads, *pushes])
    except OSError as exc:
        raise BatchError("batch.observations_unwritable", file=str(log.path), detail=str(exc)) from None
    say.out(
        "term_cohort.snapshot_done", n=len(heads), total=len(learners), pushes=len(pushes), file=str(log.path)
    )
    return 0


def _token() -> str:
    for name in ("AUTOGRADER_ROSTER_TOKEN", "GITHUB_TOKEN", "GH_TOKEN"):
        if os.environ.get(name, "").strip():
            return os.environ[name].strip()
    return ""


def github_repository(url: str | None, api_url: str) -> str | None:
    """ "owner/name" of a learner's repository when GitHub's API at `api_url` knows it:
    github.com's repositories for api.github.com, else those on the API's own host (GitHub
    Enterprise Server, the tests' stand-in)."""
    from autograder.cohort.roster import url_origin

    origin = url_origin(url or "")
    api_host = urlsplit(api_url).hostname or ""
    if origin is None or origin[1] != ("github.com" if api_host == "api.github.com" else api_host):
        return None
    match = _REPO_PATH.search(url.rstrip("/"))
    return f"{match[1]}/{match[2]}" if match else None


def _push_activity(learners: list[Learner], say: Say) -> list[Sighting]:
    """Push sightings from GitHub's repository activity (GET /repos/{owner}/{repo}/activity) of
    each learner's branch: when it got which commit, as GitHub recorded it. Without a token, or
    for a repository GitHub's API cannot tell about, nothing (said once, or per learner)."""
    token = _token()
    if not token:
        say.line("term_cohort.no_token")
        return []
    from autograder.github.rest import DEFAULT_API_URL, GitHubAPI, GitHubError

    api_url = os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL
    found: list[Sighting] = []
    for learner in learners:
        repo = github_repository(learner.url, api_url)
        if repo is None or (learner.ref and _COMMIT.fullmatch(learner.ref)):
            continue  # not on this GitHub, or a pinned commit: no branch to follow
        try:
            client = GitHubAPI(api_url, token, repo, timeout=30.0)
            branch = learner.ref or client.request("GET", f"/repos/{repo}")["default_branch"]
            ref = branch if branch.startswith("refs/") else f"refs/heads/{branch}"
            for entry in client.paginate(f"/repos/{repo}/activity?{urlencode({'ref': ref})}"):
                after = entry.get("after") if isinstance(entry, dict) else None
                if entry.get("activity_type") not in MOVES_REF or not isinstance(after, str):
                    continue
                if not _COMMIT.fullmatch(after):
                    continue
                seen = parse_time(str(entry.get("timestamp")), "timestamp").astimezone(timezone.utc)
                found.append(Sighting(learner.id, "push", after, None, seen))
        except (GitHubError, ValueError, KeyError, TypeError, AttributeError) as exc:
            say.line("term_cohort.activity_failed", id=learner.id, repo=repo, detail=str(exc))
    return found


def _as_of(
    learners: list[Learner],
    log: ObservationLog,
    at: datetime,
    scratch: Path,
    allowed: Allowed | None,
    say: Say,
    text: str,
) -> dict[str, Sighting]:
    """--at: each learner's commit as of `at` (the log's latest fetch, snapshot or push at or
    before it), checked out on its own under `scratch`; that learner is graded from there. The
    learners with no record by then are named, and get an error result that says so."""
    chosen, missing = {}, []
    for learner in learners:
        if learner.problem is not None and learner.problem[0] != "fetch":
            continue
        head = log.head_at(learner.id, at)
        if head is None:
            missing.append(learner.id)
            learner.problem = ("no_record", text)
            continue
        folder = scratch / learner.id
        problem = materialise(learner.folder, head.commit, folder, learner.url if allowed else None, allowed)
        if problem is not None:
            learner.problem = ("fetch", problem)
            continue
        learner.problem, learner.folder, learner.commit = None, folder, head.commit
        chosen[learner.id] = head
    if missing:
        say.line("term_cohort.at_no_record", n=len(missing), at=text, ids=", ".join(missing))
    return chosen


def _git_bytes(
    folder: Path, *args: str, protocols: tuple[str, ...] = (), stdin: bytes | None = None
) -> bytes:
    """git in `folder` with the roster's options (no hooks, no symlinks, no local remotes),
    reaching remotes only over `protocols`; its output, or GitError with its own words."""
    try:
        proc = subprocess.run(
            ["git", *GIT_OPTIONS, *args],
            cwd=folder,
            env=git_environment(protocols),
            capture_output=True,
            timeout=GIT_TIMEOUT,
            input=stdin if stdin is not None else b"",
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git {args[0]}: {exc}") from None
    if proc.returncode != 0:
        words = proc.stderr.decode("utf-8", "replace").strip()
        raise GitError(words[:500] or f"git {args[0]} exited with {proc.returncode}")
    return proc.stdout


def materialise(
    clone: Path, commit: str, into: Path, url: str | None = None, allowed: Allowed | None = None
) -> str | None:
    """Write `commit`'s files from the git clone `clone` into the new folder `into` (fetched
    from its remote first when the clone lacks it and `allowed` says how): None when done, else
    why not. Regular files and folders only: a symlink in the commit is left out, as grading
    never follows one; so is a submodule. The clone's HEAD and files are not touched."""
    if not (clone / ".git").is_dir():
        return f"{clone}: not a git clone"
    try:
        _git_bytes(clone, "cat-file", "-e", f"{commit}^{{commit}}")
    except GitError:
        if allowed is None or not url:
            return f"{commit}: not in {clone}"
        try:
            _git_bytes(clone, "fetch", "--quiet", "--no-tags", "origin", commit, protocols=allowed.schemes)
        except GitError as exc:
            return redact_url(str(exc))
    # The commit's objects as they are stored: ls-tree and cat-file run no filter, unlike a
    # checkout or `git archive`, which would run a smudge command a learner's own .git/config
    # (a folder grade-all did not clone) could name.
    try:
        listing = _git_bytes(clone, "ls-tree", "-r", "-z", "--full-tree", commit)
    except GitError as exc:
        return str(exc)
    files = []
    for item in listing.split(b"\0"):
        meta, _, raw = item.partition(b"\t")
        fields = meta.split()
        if len(fields) == 3 and fields[1] == b"blob" and fields[0] in (b"100644", b"100755"):
            files.append((raw.decode("utf-8", "surrogateescape"), fields[2].decode()))
    try:
        blobs = _git_bytes(
            clone, "cat-file", "--batch", stdin="".join(f"{sha}\n" for _, sha in files).encode()
        )
    except GitError as exc:
        return str(exc)
    into.mkdir(parents=True)
    at = 0
    for name, _ in files:
        header_end = blobs.index(b"\n", at)
        size = int(blobs[at:header_end].split()[2])
        data = blobs[header_end + 1 : header_end + 1 + size]
        at = header_end + 1 + size + 1
        parts = Path(name).parts
        if not parts or Path(name).is_absolute() or ".." in parts:
            continue
        target = into.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return None


def _keep_attempt(store: Store, record: Record, run: dict) -> None:
    """An unchanged learner's result, archived for the term grade when an older run did not."""
    if (
        record.observed
        and not store.attempt_path(record.learner, record.observed, run["fingerprint"]).is_file()
    ):
        data = store.result_path(record.learner).read_text(encoding="utf-8")
        kept = store.read_record(record.learner)
        pending = kept.pending if kept is not None and kept.status == "graded" else None
        store.save_attempt(record.learner, record.observed, run["fingerprint"], data, pending)


def _term(
    course: Course,
    lessons: list[Lesson],
    learners: list[Learner],
    store: Store,
    run: dict,
    log: ObservationLog,
    args: argparse.Namespace,
    at: datetime | None,
    say: Say,
):
    """The term grades (term_grades.py) from the log and the archived results; a counting
    submission never graded is checked out and graded, then everything is counted again.
    Written to DIR/term.json; None when the grading processes cannot start."""
    from autograder.cohort.term_grades import TERM_FILE

    roster = core_roster(args)
    ids = [learner.id for learner in learners]
    urls = {learner.id: learner.url for learner in learners}
    tried: set[tuple[str, str]] = set()
    while True:
        grades = count_term(course, lessons, ids, store, run["fingerprint"], log, roster, at)
        pending = {
            learner: [sub for sub in subs if (learner, sub.what) not in tried]
            for learner, subs in grades.ungraded.items()
        }
        pending = {learner: subs for learner, subs in pending.items() if subs}
        if not pending:
            break
        if not _grade_counting(course, lessons, pending, urls, store, run, args, say, tried):
            return None
    for learner, subs in sorted(grades.ungraded.items()):
        for sub in subs:
            say.line("term_cohort.still_ungraded", id=learner, what=sub.what)
    write_json(store.root / TERM_FILE, grades.as_json())
    return grades


def _grade_counting(
    course: Course,
    lessons: list[Lesson],
    pending: dict[str, list],
    urls: dict[str, str | None],
    store: Store,
    run: dict,
    args: argparse.Namespace,
    say: Say,
    tried: set[tuple[str, str]],
) -> bool:
    """Grade one never-graded counting submission per learner in `pending`, each from its commit
    checked out on its own; its result is archived (an error result when grading failed, which
    counts 0 as every error does). False when the grading processes cannot start."""
    from autograder.cohort.pool import GradingPool, PoolError, Setup, Task

    scratch = Path(tempfile.mkdtemp(prefix="autograder-term-"))
    os.chmod(scratch, 0o755)  # as SUBMISSIONS: the grading processes read the files from here
    try:
        tasks, whats = [], {}
        for learner, subs in pending.items():
            sub = subs[0]
            tried.add((learner, sub.what))
            folder = scratch / learner
            problem = (
                materialise(args.submissions / learner, sub.commit, folder, urls.get(learner), allowed(args))
                if sub.commit and sub.what.startswith("commit:")
                else "no commit to check out (a folder's files, seen before)"
            )
            if problem is not None:
                say.line("term_cohort.ungradable", id=learner, what=sub.what, detail=problem)
                continue
            exercises = folder / "exercises" if (folder / "exercises").is_dir() else folder
            tasks.append(Task(learner, str(exercises), str(folder)))
            whats[learner] = sub.what
        if not tasks:
            return True
        say.line("term_cohort.grading_counting", n=len(tasks))
        setup = Setup(str(course.root / "course.yml"), tuple(run["lessons"]), run["seed"], run["language"])
        pool = GradingPool(
            setup,
            min(args.jobs or _default_jobs(), len(tasks)),
            args.learner_timeout or default_learner_timeout(lessons),
        )
        for outcome in pool.run(tasks):
            if outcome.error is None:
                result_json = outcome.result_json
            else:
                failed = Record(outcome.learner, "", "error", error=outcome.error, detail=outcome.detail)
                result_json = error_result_json(
                    course, lessons, run["language"], run["seed"], failed.error_reason()
                )
            pending = outcome.pending if outcome.error is None else None  # an error result is not reused
            store.save_attempt(
                outcome.learner, whats[outcome.learner], run["fingerprint"], result_json, pending
            )
        return True
    except PoolError as exc:
        say.line("batch.pool_failed", detail=str(exc))
        return False
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _triage(
    course: Course,
    lessons: list[Lesson],
    learners: list[Learner],
    store: Store,
    run: dict,
    say: Say,
    log: ObservationLog,
    fetched: dict[str, datetime],
    as_of: dict[str, Sighting] | None = None,
) -> tuple[dict[str, tuple[Record, Learner]], int, int]:
    """Sort the learners out: {id: (record, learner)} of those to grade, how many are unchanged since a
    previous run (their result stays), how many cannot be graded (an error result now). Each
    learner's submission is looked up in the observation `log` (and logged when new) on the way:
    `fetched` has the time each roster learner's fetch finished."""
    todo, unchanged, failed = {}, 0, 0
    for learner in learners:
        record = Record(
            learner.id, "", "graded", learner.first_name, learner.last_name, learner.email, learner.commit
        )
        if learner.problem is not None:
            kind, detail = learner.problem
            record.status, record.error, record.detail = "error", kind, detail
            store.save(
                record,
                error_result_json(course, lessons, run["language"], run["seed"], record.error_reason()),
            )
            say.line(f"batch.problem_{kind}", id=learner.id, detail=detail)
            failed += 1
            continue
        try:
            content = content_hash(course, lessons, learner.exercises, boundary=learner.folder)
        except OSError as exc:  # an unreadable folder or an odd file: this learner only
            record.status, record.error, record.detail = "error", "unreadable", f"{type(exc).__name__}: {exc}"
            store.save(
                record,
                error_result_json(course, lessons, run["language"], run["seed"], record.error_reason()),
            )
            say.line("batch.problem_unreadable", id=learner.id, detail=record.detail)
            failed += 1
            continue
        if as_of and learner.id in as_of:  # --at: the commit recorded then, as first seen
            head = as_of[learner.id]
            sighting = log.first_seen(learner.id, head.what) or head
        else:
            sighting = _observe(log, learner, content, fetched.get(learner.id))
        record.timestamp, record.observed = sighting.timestamp, sighting.what
        record.key = learner_key(run["fingerprint"], content)
        if store.is_done(learner.id, record.key):
            _refresh(store, record)
            if has_deadlines(course, lessons):
                _keep_attempt(store, record, run)
            unchanged += 1
        elif _archived(store, record, run):  # graded before as this very submission (--at, a push back)
            unchanged += 1
        else:
            todo[learner.id] = (record, learner)
    return todo, unchanged, failed


def _archived(store: Store, record: Record, run: dict) -> bool:
    """Whether this submission's result is in the archive (attempts/, kept with deadlines) under
    the run's fingerprint: then it is the learner's result again, without grading (the same
    files, graders and seed give the same result)."""
    archived = (
        store.read_archived(record.learner, record.observed, run["fingerprint"]) if record.observed else None
    )
    if archived is None:
        return False
    record.pending = archived[1]
    store.save(record, archived[0])
    return True


def _grade(
    course: Course,
    lessons: list[Lesson],
    todo: dict[str, tuple[Record, Learner]],
    store: Store,
    run: dict,
    jobs: int,
    learner_timeout: float | None,
    say: Say,
) -> tuple[int, int] | None:
    """Grade the learners in `todo`, saving each result as it comes: (graded, errors), or None
    when the grading processes cannot even start."""
    from autograder.cohort.pool import GradingPool, PoolError, Setup, Task, remove_stale_scratch

    remove_stale_scratch()
    _import_publishing_meanwhile()
    setup = Setup(str(course.root / "course.yml"), tuple(run["lessons"]), run["seed"], run["language"])
    pool = GradingPool(setup, jobs, learner_timeout or default_learner_timeout(lessons))
    progress = _Progress(say, len(todo))
    pool.on_start = progress.started
    graded = errors = 0
    try:
        tasks = (
            Task(ident, str(learner.exercises), str(learner.folder)) for ident, (_, learner) in todo.items()
        )
        for outcome in pool.run(tasks):
            record = todo[outcome.learner][0]
            record.seconds, record.pending = round(outcome.seconds, 3), outcome.pending
            if outcome.error is None:
                store.save(record, outcome.result_json)
                if record.observed and has_deadlines(course, lessons):  # the term may count it later
                    store.save_attempt(
                        record.learner,
                        record.observed,
                        run["fingerprint"],
                        outcome.result_json,
                        outcome.pending,
                    )
                graded += 1
            else:
                record.status, record.error, record.detail = "error", outcome.error, outcome.detail
                store.save(
                    record,
                    error_result_json(course, lessons, run["language"], run["seed"], record.error_reason()),
                )
                errors += 1
            progress.finished(record, store.read_result(record.learner))
    except PoolError as exc:
        progress.stop()
        say.line("batch.pool_failed", detail=str(exc))
        return None
    finally:
        progress.stop()
    return graded, errors


def _import_publishing_meanwhile() -> None:
    """Import what `publish` needs (nbgrader's gradebook, matplotlib: ~1.5 s) in a thread while
    the grading processes work: this process only waits on them until then."""

    def load() -> None:
        try:
            import matplotlib

            matplotlib.use("Agg")  # files only, never a window (as cohort.render_chart)
            import matplotlib.pyplot  # noqa: F401
            import nbgrader.api  # noqa: F401
        except Exception:  # noqa: BLE001 - publish imports them again and reports what fails
            pass

    threading.Thread(target=load, name="import-publishing", daemon=True).start()


def _learners(args: argparse.Namespace, say: Say) -> list[Learner]:
    if args.roster is not None:
        return read_roster(args.roster, args.submissions, allowed(args))
    learners, skipped = learners_in(args.submissions)
    for name in skipped:
        say.line("batch.skipped_folder", folder=name)
    return learners


def _fetch(learners: list[Learner], jobs: int, allowed: Allowed) -> dict[str, datetime]:
    """Clone or update every roster learner's repository (roster.fetch: a failure is kept on the
    learner), `jobs` at a time: {id: when that learner's fetch finished}, on this machine's clock.
    Each learner's own moment, not the end of all fetches, so that a cohort fetched over minutes
    stamps nobody later than their own fetch."""
    finished: dict[str, datetime] = {}

    def one(learner: Learner) -> None:
        fetch(learner, allowed)
        finished[learner.id] = observations.now()

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(one, learners))  # interrupted: map cancels the fetches not started yet
    return finished


def _observe(log: ObservationLog, learner: Learner, content: str, fetched_at: datetime | None) -> Sighting:
    """The first sighting of what is graded for `learner`: the commit this run fetched, else the
    content of the folder as found (see observations.py for why a clone found in SUBMISSIONS
    counts by its files, not its HEAD). Logged now when it is new."""
    try:
        if fetched_at is not None and learner.commit:
            return log.observe(learner.id, "fetch", commit=learner.commit, content=None, seen=fetched_at)
        return log.observe(
            learner.id, "folder", commit=learner.commit, content=content, seen=observations.now()
        )
    except OSError as exc:  # the output folder itself: every learner would fail the same way
        raise BatchError("batch.observations_unwritable", file=str(log.path), detail=str(exc)) from None


def _refresh(store: Store, record: Record) -> None:
    """An unchanged learner keeps its result; names, email, commit and time follow the roster
    and the observation log."""
    old = store.read_record(record.learner)
    fields = ("first_name", "last_name", "email", "commit", "timestamp", "observed")
    if old is not None and any(getattr(old, name) != getattr(record, name) for name in fields):
        for name in fields:
            setattr(old, name, getattr(record, name))
        store.save_record(old)


class _Progress:
    """A rich progress bar on a terminal; one plain line per learner when redirected."""

    def __init__(self, say: Say, total: int) -> None:
        self.say, self.total, self.done = say, total, 0
        self.grading: list[str] = []
        self._bar = None
        if total and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._task = self._bar.add_task(say.text("batch.progress_starting"), total=total)
            self._bar.start()

    def started(self, task) -> None:
        self.grading.append(task.learner)
        self._describe()

    def finished(self, record: Record, result: dict | None) -> None:
        self.done += 1
        if record.learner in self.grading:
            self.grading.remove(record.learner)
        if record.status == "graded" and result is not None:
            line = self.say.text(
                "batch.learner_done",
                done=self.done,
                total=self.total,
                id=record.learner,
                score=result.get("score"),
                max_score=result.get("max_score"),
                xp=result.get("xp"),
                xp_max=result.get("xp_max"),
            )
        else:
            reason = i18n.localize(record.error_reason(), self.say.lang)
            line = self.say.text(
                "batch.learner_error", done=self.done, total=self.total, id=record.learner, reason=reason
            )
        if self._bar is not None:
            self._bar.console.print(line, markup=False, highlight=False)
            self._bar.update(self._task, advance=1)
            self._describe()
        else:
            print(line, file=sys.stderr, flush=True)

    def _describe(self) -> None:
        if self._bar is not None:
            self._bar.update(
                self._task, description=self.say.text("batch.progress", learners=", ".join(self.grading))
            )

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
