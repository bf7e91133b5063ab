"""Benchmark: the grading service at scale (issue 33): grades per minute and latency for one burst of
submissions, graded four ways on this machine.

Run from the repository root (needs redis-server and PostgreSQL's initdb/pg_ctl, as `.ci/run`
installs them):

    python bench/bench_service_scale.py [--submissions 200] [--lessons 03] [--modes ...]

The same `--submissions` pushes (one per learner, so none is superseded: every one is graded;
the kinds of a cohort in turn: solutions, stubs, correct and buggy variants of lesson 03, or
of every lesson with `--lessons all`), POSTed at once, graded:

  embedded   `autograder serve` as an instructor starts it: SQLite and its queue in the data
             folder, its own worker process with the default one grading thread;
  workers-1  `serve --workers 0` over PostgreSQL and Redis, and one `autograder worker`
             process (its own scratch folder, no GitHub credential: it reads each submission's
             archive from the store);
  workers-2  the same with two `autograder worker` processes;
  grade-all  `autograder grade-all --jobs 2` on the same files, one folder per learner.

For each: the wall time from the first POST until every submission is final, grades per
minute, and the median and 95th percentile of the latency (a submission's POST to its final
state as the store shows it; for grade-all, the run's start to the moment its learner's record
was written). Everything is real but GitHub (tests/support's OIDC issuer and API stand-in, as
bench/bench_service.py uses them). A measurement, never a test: it prints a table and asserts
no time; shared machines are noisy, compare numbers within one run only.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

from bench_service import (  # noqa: E402  (the path above first)
    FINAL,
    SERVE_START_S,
    autograder,
    commit,
    free_port,
    lesson03_kinds,
    make_learner,
    percentile,
    write_roster,
)

MODES = ("embedded", "workers-1", "workers-2", "grade-all")


class Service:
    """`autograder serve` (and, distributed, its `autograder worker` processes) as subprocesses."""

    def __init__(
        self, base: Path, issuer, github, roster: Path, lessons, *, database=None, queue=None, workers=0
    ):
        from support.fake_github import TOKEN

        from autograder.service.store import Store

        self.base, self.issuer, self.github = base, issuer, github
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        data = base / "servicio"
        args = autograder(
            "--course", str(ROOT / "course.yml"), "serve", "--roster", str(roster), "--public-url", self.url,
            "--issuer", issuer.url, "--github-api", github.url, "--data", str(data), "--port", str(self.port),
            "--per-hour", "100000", "--clone-url", f"{github.url}/git/{{repository}}.git",
            "--allow-scheme", "http", "--allow-host", "127.0.0.1", "--lessons", *lessons,
        )  # fmt: skip
        if database:
            args += ["--database-url", database, "--queue-url", queue, "--workers", "0"]
        env = {**os.environ, "AUTOGRADER_SERVICE_TOKEN": TOKEN}
        env.pop("AUTOGRADER_LANG", None)
        base.mkdir(parents=True, exist_ok=True)
        self.logs = [base / "serve.log"]
        self.procs = [self._start(args, env, self.logs[0])]
        self._wait_healthy()
        for index in range(workers):  # no credential in a worker's environment
            clean = {k: v for k, v in env.items() if "TOKEN" not in k}
            log = base / f"worker-{index}.log"
            self.logs.append(log)
            self.procs.append(
                self._start(
                    autograder(
                        "--course",
                        str(ROOT / "course.yml"),
                        "worker",
                        "--database-url",
                        database,
                        "--queue-url",
                        queue,
                        "--data",
                        str(base / f"worker-{index}"),
                        "--lessons",
                        *lessons,
                    ),  # fmt: skip
                    clean,
                    log,
                )
            )
        self.store = Store(database or f"sqlite:///{data / 'servicio.db'}")

    def _start(self, args, env, log_path: Path) -> subprocess.Popen:
        with open(log_path, "w") as log:
            return subprocess.Popen(args, cwd=self.base, stdout=log, stderr=subprocess.STDOUT, env=env)

    def _wait_healthy(self) -> None:
        import urllib.request

        end = time.monotonic() + SERVE_START_S
        while True:
            if self.procs[0].poll() is not None:
                sys.exit(f"autograder serve exited ({self.procs[0].returncode}):\n{self.log()}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=5):
                    return
            except OSError:
                if time.monotonic() > end:
                    sys.exit(f"autograder serve did not answer within {SERVE_START_S:g} s:\n{self.log()}")
                time.sleep(0.2)

    def log(self) -> str:
        return "\n".join(p.read_text(encoding="utf-8", errors="replace")[-3000:] for p in self.logs)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.store.close()

    def token(self, learner, sha: str) -> str:
        run = self.github.add_run(learner.repo["full_name"], head_sha=sha, created_at=time.time() - 5)
        return self.issuer.mint(
            aud=self.url,
            repository=learner.repo["full_name"],
            repository_id=str(learner.repo["id"]),
            sha=sha,
            run_id=str(run["id"]),
        )

    def post(self, token: str) -> None:
        import urllib.error
        import urllib.request

        request = urllib.request.Request(
            self.url + "/submissions", data=b"", headers={"Authorization": f"Bearer {token}"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as answer:
                answer.read()
        except urllib.error.HTTPError as error:
            sys.exit(f"the service refused a submission ({error.code}): {error.read()[:500]!r}\n{self.log()}")


def warm_up(service: Service, learner, files: dict[str, str]) -> None:
    """One grading first, so that every worker has imported torch (a deadline evening's service
    is warm); not counted."""
    sha = commit(learner, files, "warm-up")
    service.post(service.token(learner, sha))
    end = time.monotonic() + 600
    while not any(s.sha == sha and s.state in FINAL for s in service.store.submissions()):
        if time.monotonic() > end:
            sys.exit(f"the warm-up was not graded within 10 minutes\n{service.log()}")
        time.sleep(0.2)


def burst(service: Service, plan: list[tuple]) -> dict:
    """POST every (learner, sha) at once; follow the store until each is final."""
    tokens = [(sha, service.token(learner, sha)) for learner, sha in plan]
    sent: dict[str, float] = {}
    lock = threading.Lock()

    def post(item) -> None:
        sha, token = item
        at = time.perf_counter()
        service.post(token)
        with lock:
            sent[sha] = at

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(post, tokens))
    final_at: dict[str, float] = {}
    states: dict[str, str] = {}
    shas = set(sent)
    while len(final_at) < len(shas):
        now = time.perf_counter()
        for submission in service.store.submissions():
            if submission.sha in shas and submission.state in FINAL and submission.sha not in final_at:
                final_at[submission.sha], states[submission.sha] = now, submission.state
        if now - started > 3 * 3600:
            sys.exit(f"the burst did not drain within three hours\n{service.log()}")
        time.sleep(0.25)
    latencies = [final_at[sha] - sent[sha] for sha in shas]
    return summary(
        time.perf_counter() - started,
        latencies,
        graded=sum(state in ("done", "error") for state in states.values()),
        errors=sum(state == "error" for state in states.values()),
    )


def grade_all(subs: Path, out: Path, lessons, jobs: int) -> dict:
    started_wall = time.time()
    started = time.perf_counter()
    done = subprocess.run(
        autograder("grade-all", str(subs), "--out", str(out), "--jobs", str(jobs), "--lessons", *lessons),
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    took = time.perf_counter() - started
    if done.returncode not in (0, 1):
        sys.exit(f"grade-all failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    records = list((out / "records").glob("*.json"))
    latencies = [record.stat().st_mtime - started_wall for record in records]
    return summary(took, latencies, graded=len(records), errors=0)


def summary(drained: float, latencies: list[float], *, graded: int, errors: int) -> dict:
    return {
        "drained_s": drained,
        "graded": graded,
        "errors": errors,
        "per_min": graded / drained * 60 if drained else float("nan"),
        "median": statistics.median(latencies) if latencies else float("nan"),
        "p95": percentile(latencies, 95),
    }


def submissions_of(course, lessons, count: int) -> list[tuple[str, dict[str, str]]]:
    """`count` submissions (paths from the repository root) cycling through a cohort's kinds:
    lesson 03's solution, stub, correct and buggy variants; with other lessons, their solutions
    beside."""
    from support.variants import solution_files

    lesson03, kinds = lesson03_kinds()
    others = {
        f"exercises/{lesson.folder}/{name}": text
        for lesson in course.lessons
        if lesson.id in lessons and lesson.id != "03"
        for name, text in solution_files(lesson).items()
    }
    plan = []
    for index in range(count):
        name, files = kinds[index % len(kinds)]
        plan.append((name, {**others, **{f"exercises/{lesson03.folder}/{n}": t for n, t in files.items()}}))
    return plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--submissions", type=int, default=200, help="submissions in the burst (one per learner)"
    )
    parser.add_argument("--lessons", nargs="+", default=["03"], help="lessons graded ('all': the course)")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    args = parser.parse_args()

    from support.fake_github import FakeGitHub
    from support.oidc_issuer import LocalIssuer
    from support.servers import running_postgres, running_redis

    from autograder.core.manifest import load_course

    course = load_course(ROOT / "course.yml")
    lessons = [lesson.id for lesson in course.lessons] if args.lessons == ["all"] else args.lessons
    plan = submissions_of(course, lessons, args.submissions)
    base = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    os.chmod(base, 0o755)
    rows = []
    try:
        with LocalIssuer() as issuer, FakeGitHub() as github:
            github.git_root = base / "git"
            learners = [make_learner(github, base, i) for i in range(args.submissions + 1)]
            roster = base / "roster.yml"
            write_roster(roster, learners)
            pushes = [
                (learner, commit(learner, files, name)) for learner, (name, files) in zip(learners, plan)
            ]
            subs = base / "submissions"
            for learner, (_, files) in zip(learners, plan):
                for rel, text in files.items():
                    path = subs / learner.id / Path(rel).relative_to("exercises")
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(text, encoding="utf-8")
            subprocess.run(["chmod", "-R", "a+rX", str(base)], check=True)
            print(f"{args.submissions} submissions of lessons {' '.join(lessons)}, {os.cpu_count()} cores")
            for mode in args.modes:
                print(f"-- {mode}", flush=True)
                if mode == "grade-all":
                    got = grade_all(subs, base / "grade-all", lessons, 2)
                    rows.append(("grade-all --jobs 2", got))
                    continue
                with contextlib.ExitStack() as servers:
                    database = queue = None
                    if mode != "embedded":  # a fresh PostgreSQL and Redis for each distributed mode
                        from support.servers import new_database

                        database = new_database(servers.enter_context(running_postgres()))
                        queue = servers.enter_context(running_redis())
                    service = Service(
                        base / mode,
                        issuer,
                        github,
                        roster,
                        lessons,
                        database=database,
                        queue=queue,
                        workers=int(mode[-1]) if mode != "embedded" else 0,
                    )
                    try:
                        warm_up(service, learners[-1], plan[0][1])
                        got = burst(service, pushes)
                    finally:
                        service.stop()
                label = {
                    "embedded": "serve (embedded: SQLite, 1 grading thread)",
                    "workers-1": "serve --workers 0 + 1 autograder worker (PostgreSQL, Redis)",
                    "workers-2": "serve --workers 0 + 2 autograder workers (PostgreSQL, Redis)",
                }[mode]
                rows.append((label, got))
    finally:
        shutil.rmtree(base, ignore_errors=True)

    width = max(len(label) for label, _ in rows)
    print()
    print(f"{'how':<{width}}  {'graded':>6}  {'errors':>6}  {'all final s':>11}  {'grades/min':>10}  "
          f"{'median s':>8}  {'p95 s':>7}")  # fmt: skip
    for label, got in rows:
        print(
            f"{label:<{width}}  {got['graded']:>6}  {got['errors']:>6}  {got['drained_s']:>11.1f}  "
            f"{got['per_min']:>10.1f}  {got['median']:>8.1f}  {got['p95']:>7.1f}"
        )


if __name__ == "__main__":
    main()
