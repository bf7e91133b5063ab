"""`autograder grade-all` on a generated cohort (tests/support/cohort_factory.py), through the real
command line: real grading processes and sandboxed workers, real git remotes, real nbgrader.

What must hold: every learner gets the result a single `autograder grade` of the same files and
seed gives; the CSV, the nbgrader gradebook and `nbgrader export` agree; a run killed with
SIGKILL resumes without regrading what it finished; shards partition the cohort exactly and
merge into what one run gives; a learner that crashes or outlasts its grading process costs
only its own grade; the roster clones (over HTTP from local bare remotes, see cohort_factory.served),
updates and reports bad repositories per learner.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from support.cohort_factory import (
    DIGITS,
    FAKE_MARK,
    HANG_MARK,
    HANG_NAME,
    RUN_TIMEOUT,
    bare_remote,
    commit,
    forever_hanging,
    grade_all,
    lesson03_cohort,
    records,
    results,
    served,
    stub_files,
)
from support.grading import write_submission
from support.processes import alive, children_of, tagged_processes
from support.project import ROOT, SEED
from support.variants import solution_files

from autograder.cli import main as cli_main
from autograder.cohort.grade_all import shard_of
from autograder.sandbox.client import worker_user

UNPRIVILEGED = worker_user() is not None  # a root grader: learners' code runs as nobody
COHORT = ("ana", "beto", "carla", "dario", "eva", "fede", "gala", "hugo", "ines")
OUTPUTS = {
    "run.json",
    "results",
    "records",
    "gradebook.db",
    "grades.csv",
    "cohort.csv",
    "report.md",
    "report.png",
    "observations.jsonl",
    "observations.jsonl.lock",
    "canvas.csv",  # the LMS files (autograder/term/lms.py), written with the others
    "moodle.csv",
}
# Real cohorts, graded several times: on a loaded machine a test with its fixtures may take
# longer than the suite's 600 s guard (a hang guard, not a speed target).
pytestmark = pytest.mark.timeout(2400)


def verdicts(result: dict) -> list[tuple]:
    """What "the same result" means: every check's status and score, lesson by lesson."""
    return [
        (lesson["id"], check["id"], check["status"], check["score"], check["max_score"])
        for lesson in result["lessons"]
        for check in lesson["checks"]
    ]


def read_csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))


def no_survivors(digits: str = DIGITS) -> None:
    end = time.monotonic() + 5
    while (found := tagged_processes(digits)) and time.monotonic() < end:
        time.sleep(0.1)
    assert found == [], f"processes left behind: {found}"


def exercises_of(folder: Path) -> Path:
    return folder / "exercises" if (folder / "exercises").is_dir() else folder


# ------------------------------------------------------------------ the cohort, graded in two shards


def shared(tmp_path_factory, name: str, build) -> dict:
    """`build(folder)` once for the whole test run, even across pytest-xdist workers (each of
    which would otherwise grade the cohort again): the first worker builds under a lock, the
    others wait and read what it recorded (plain JSON)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's folder, shared by its workers
    folder, done = root / name, root / name / "done.json"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.is_file():
            return json.loads(done.read_text(encoding="utf-8"))
        folder.mkdir(exist_ok=True)
        data = build(folder)
        done.write_text(json.dumps(data), encoding="utf-8")
        return data


@pytest.fixture(scope="module")
def graded(course, tmp_path_factory) -> dict:
    """The cohort graded as shards 1/2 and 2/2 (two parallel grading processes each), merged."""

    def build(base: Path) -> dict:
        cohort = lesson03_cohort(base / "cohort", course, unprivileged=UNPRIVILEGED)
        shards = [base / "shard-1", base / "shard-2"]
        for index, out in enumerate(shards, 1):
            grade_all(
                base / "cohort",
                "--out",
                out,
                "--shard",
                f"{index}/2",
                "--jobs",
                2,
                "--lessons",
                "03",
                "--seed",
                SEED,
            )
        grade_all("--merge", *shards, "--out", base / "merged")
        no_survivors()
        # The hostile learner's marks are this process's: a test in another worker checks these.
        return {
            "submissions": str(base / "cohort"),
            "cohort": {k: str(v) for k, v in cohort.items()},
            "shards": [str(out) for out in shards],
            "merged": str(base / "merged"),
            "fake_mark": FAKE_MARK,
            "digits": DIGITS,
        }

    data = shared(tmp_path_factory, "batch-graded", build)
    paths = {key: Path(data[key]) for key in ("submissions", "merged")}
    return {
        **data,
        **paths,
        "shards": [Path(p) for p in data["shards"]],
        "cohort": {k: Path(v) for k, v in data["cohort"].items()},
    }


@pytest.fixture(scope="module")
def single(graded, course, tmp_path_factory) -> dict[str, dict]:
    """Each learner graded alone, by `autograder grade 03 --submission <exercises> --seed SEED
    --format json` (the CLI's main, called once per learner in one interpreter). A folder with
    nothing of lesson 03 (gala's) is a usage error for `grade`: hers is the engine's own result
    for the same folder and seed, as `grade` would render it."""

    def build(out: Path) -> dict:
        calls = [
            [
                [
                    "grade",
                    "03",
                    "--submission",
                    str(exercises_of(folder)),
                    "--seed",
                    str(SEED),
                    "--format",
                    "json",
                    "--output",
                    str(out / f"{learner}.json"),
                ],
                not (exercises_of(folder) / course.lesson("03").folder).is_dir(),
            ]
            for learner, folder in graded["cohort"].items()
        ]
        script = (
            "import json, sys\nfrom pathlib import Path\nfrom autograder.cli import main\n"
            "from autograder.engine.grading import grade\nfrom autograder.core.manifest import load_course\n"
            "from autograder.render.output import render_json\n"
            "for argv, refused in json.loads(sys.argv[1]):\n"
            "    assert main(argv) == (2 if refused else 0), argv\n"
            "    if refused:\n"
            f"        course = load_course({str(ROOT / 'course.yml')!r})\n"
            "        result = grade(course, [course.lesson('03')], Path(argv[3]), lang='es', seed=int(argv[5]))\n"
            "        Path(argv[-1]).write_text(render_json(result, 'es'), encoding='utf-8')\n"
        )
        proc = subprocess.run(
            [sys.executable, "-c", script, json.dumps(calls)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        no_survivors()
        return {
            learner: json.loads((out / f"{learner}.json").read_text(encoding="utf-8"))
            for learner in graded["cohort"]
        }

    return shared(tmp_path_factory, "batch-single", build)


def test_shards_partition_the_cohort_exactly(graded):
    shard_runs = [json.loads((out / "run.json").read_text(encoding="utf-8")) for out in graded["shards"]]
    parts = [set(run["learners"]) for run in shard_runs]
    assert parts[0] and parts[1], parts  # a real split of these nine
    assert parts[0].isdisjoint(parts[1]) and parts[0] | parts[1] == set(COHORT)
    for out, part in zip(graded["shards"], parts):
        assert set(results(out)) == part and set(records(out)) == part
        assert {shard_of(learner, 2) for learner in part} == {graded["shards"].index(out) + 1}
    assert set(results(graded["merged"])) == set(COHORT)
    assert {p.name for p in graded["merged"].iterdir()} == OUTPUTS
    # The partition is a function of the id alone: disjoint and covering for any N.
    ids = [f"alumno-{i}" for i in range(400)]
    for count in (1, 2, 3, 5, 8):
        shards = [[learner for learner in ids if shard_of(learner, count) == i] for i in range(1, count + 1)]
        assert sorted(learner for part in shards for learner in part) == sorted(ids)
        assert all(len(part) > 400 / count / 2 for part in shards)  # none starved


def test_every_learner_gets_the_result_of_a_single_grade(graded, single):
    batch = results(graded["merged"])
    assert set(batch) == set(single)
    for learner in COHORT:
        assert verdicts(batch[learner]) == verdicts(single[learner]), learner
        assert batch[learner]["seed"] == SEED
    # Where the learner's code behaves (no hang, no attack), the whole JSON is the same,
    # messages included.
    for learner in ("ana", "beto", "carla", "dario", "gala", "hugo", "ines"):
        assert batch[learner] == single[learner], learner
    # And the cohort is what it was built to be.
    scores = {learner: batch[learner]["score"] for learner in COHORT}
    assert scores["ana"] == scores["hugo"] == batch["ana"]["max_score"] and batch["ana"]["xp"] == 50
    assert scores["beto"] == scores["eva"] == scores["gala"] == 0
    assert 0 < scores["carla"] < scores["ana"] and 0 < scores["dario"] < scores["ana"]
    assert 0 < scores["ines"] < scores["ana"]
    failing = {c["todo"] for c in batch["dario"]["lessons"][0]["checks"] if c["status"] == "failed"}
    assert "scaling" in failing
    hang = {c["id"]: c for c in batch["fede"]["lessons"][0]["checks"]}
    assert hang["mask-buffer"]["status"] == "error" and "Tiempo agotado" in hang["mask-buffer"]["message"]
    assert hang["np-mask"]["status"] == "passed"  # the other file, graded on in a fresh worker


def test_a_hostile_learner_spoils_nothing(graded):
    for out in (*graded["shards"], graded["merged"]):
        assert {p.name for p in out.iterdir()} <= OUTPUTS
        for path in out.rglob("*"):
            if path.is_file() and path.suffix != ".png":
                assert graded["fake_mark"] not in path.read_text(encoding="utf-8", errors="replace"), path
    eva = results(graded["merged"])["eva"]
    assert eva["score"] == 0 and eva["xp"] == 0
    no_survivors(graded["digits"])


def test_csv_gradebook_and_nbgrader_export_agree(graded, course, tmp_path):
    from nbgrader.api import Gradebook

    out = graded["merged"]
    batch = results(out)
    rows = read_csv(out / "grades.csv")
    lesson = course.lesson("03")
    assert [(r["assignment"], r["student_id"]) for r in rows] == [(lesson.folder, s) for s in sorted(COHORT)]
    with Gradebook(f"sqlite:///{out / 'gradebook.db'}") as gb:
        assert [a.name for a in gb.assignments] == [lesson.folder]
        assert sorted(s.id for s in gb.students) == sorted(COHORT)
        cells = {c.name: c.max_score for c in gb.find_notebook(lesson.folder, lesson.folder).grade_cells}
        # A check skipped for the whole cohort (gpu-parity without a GPU) is a cell worth 0, so
        # the maximum is the one `autograder grade` reports (100, not 105).
        skipped = {
            check["id"] for check in batch["ana"]["lessons"][0]["checks"] if check["status"] == "skipped"
        }
        assert cells == {spec.id: 0.0 if spec.id in skipped else float(spec.points) for spec in lesson.checks}
        assert sum(cells.values()) == batch["ana"]["max_score"]
        for row in rows:
            learner = row["student_id"]
            submission = gb.find_submission(lesson.folder, learner)
            assert float(row["raw_score"]) == submission.score == batch[learner]["score"]
            assert float(row["max_score"]) == submission.max_score == sum(cells.values())
            assert int(row["xp"]) == batch[learner]["xp"]
            for check in batch[learner]["lessons"][0]["checks"]:
                grade = gb.find_grade(check["id"], lesson.folder, lesson.folder, learner)
                assert grade.score == check["score"], (learner, check["id"])
    # nbgrader's own exporter, on our gradebook, writes exactly our rows (its columns).
    export = tmp_path / "export.csv"
    proc = subprocess.run(
        ["nbgrader", "export", "--db", f"sqlite:///{out / 'gradebook.db'}", "--to", str(export)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    theirs = read_csv(export)
    ours = [{key: row[key] for key in theirs[0]} for row in rows]

    def by_row(row):  # nbgrader orders by last name, we by id
        return row["assignment"], row["student_id"]

    assert sorted(theirs, key=by_row) == sorted(ours, key=by_row)
    # cohort.csv: one row per learner, the lesson's points in a column of its own.
    wide = {r["student_id"]: r for r in read_csv(out / "cohort.csv")}
    for learner in COHORT:
        assert float(wide[learner][lesson.folder]) == batch[learner]["score"]
        assert float(wide[learner]["max_score"]) == batch[learner]["max_score"]
        assert int(wide[learner]["xp"]) == batch[learner]["xp"] and wide[learner]["status"] == "graded"


def _not_started(message: str) -> bool:
    return "pendiente" in message or "No encuentro el archivo" in message


def _does_not_load(message: str) -> bool:
    """The engine's one line for a learner's file that does not load (engine/learner_errors.py)."""
    return message.startswith(("Error de sintaxis en ", "Error de importación en ", "Error al cargar "))


def test_the_report_puts_the_todo_learners_are_stuck_on_first(graded, course):
    """The report's TODO table, against counts made here from the results' messages."""
    out = graded["merged"]
    lesson = course.lesson("03")
    expected = {}
    for todo in lesson.todos:
        stuck = pending = 0
        for result in results(out).values():
            checks = [c for c in result["lessons"][0]["checks"] if c["todo"] == todo.id]
            if any(
                f"TODO [{todo.id}] pendiente" in c["message"]
                or (c["todo"] == todo.id and "No encuentro el archivo" in c["message"])
                for c in result["lessons"][0]["checks"]
            ):
                pending += 1
            elif any(
                c["status"] in ("failed", "error")
                and not _not_started(c["message"])
                and not _does_not_load(c["message"])
                for c in checks
            ):
                stuck += 1
            elif any(c["status"] in ("failed", "error") and not _does_not_load(c["message"]) for c in checks):
                pending += 1  # every failing check of it waits on a TODO still the stub
            # A check its file's load error stopped counts for no TODO: the learner is under
            # "No se ejecuta", once, with the file and line.
        expected[todo.id] = (stuck, pending)
    report = (out / "report.md").read_text(encoding="utf-8")
    section = report.split("## ¿En qué TODO se atascan?")[1].split("\n## ")[0]
    table = [line for line in section.splitlines() if line.startswith("| `")]
    shown = {}
    for line in table:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        shown[cells[0].strip("`")] = (int(cells[2].split()[0]), int(cells[3].split()[0]))
    assert shown == expected
    order = [shown[line.split("`")[1]] for line in table]
    assert order == sorted(order, key=lambda sp: (-sp[0], -sp[1]))
    assert order[0][0] > 0  # somebody is stuck somewhere in this cohort
    # beto's copy is untouched and gala has no lesson folder: not started, on every TODO.
    assert all(pending >= 2 for _, pending in shown.values()), shown
    # The checks table: only checks somebody is stuck on, highest failure rate first, no
    # quiz or informational check; the quiz is a row of its own section.
    checks = report.split("## Comprobaciones\n")[1].split("\n## ")[0]
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in checks.splitlines()
        if line.startswith("| `")
    ]
    failed = [int(row[3].split()[0]) for row in rows]
    assert rows and all(failed) and failed == sorted(failed, reverse=True)
    assert not any(row[0].startswith("`quiz-") for row in rows)
    apart = report.split("## Cuestionarios y comprobaciones informativas\n")[1].split("\n## ")[0]
    assert "| cuestionario · la más fallada: pregunta " in apart  # ines answered them all wrong
    # fede's attention.py never finishes importing: the report names the checks that hung.
    hung = report.split("## Comprobaciones que no terminaron\n")[1].split("\n## ")[0]
    assert "- `fede` · lección 03: `mask-buffer`" in hung, hung
    assert "| 03 · Self-attention causal, multi-cabeza | 2 (22 %) |" in report  # ana and hugo
    # eva's attention.py starts a process at import, which the sandbox refuses: her file does
    # not load, and the report says so once, with the file and line.
    no_run = report.split("## No se ejecuta\n")[1].split("\n## ")[0]
    assert [line for line in no_run.splitlines() if "`eva`" in line and "attention.py:" in line], no_run
    from matplotlib.image import imread

    picture = imread(out / "report.png")
    assert picture.ndim == 3 and picture.shape[0] > 200 and picture.shape[1] > 400


def test_rerunning_is_idempotent_and_shards_match_one_run(graded, tmp_path):
    """The merged folder, rerun as one unsharded run, has nothing left to grade: the shards
    graded every learner exactly as one run would, and nothing changes."""
    again = tmp_path / "again"
    shutil.copytree(graded["merged"], again)
    proc = grade_all(graded["submissions"], "--out", again, "--jobs", 2, "--lessons", "03")
    assert "0 corregidos, 9 sin cambios, 0 con error" in proc.stdout, proc.stdout + proc.stderr
    for name in ("grades.csv", "cohort.csv", "report.md", "report.png"):
        assert (again / name).read_bytes() == (graded["merged"] / name).read_bytes(), name
    assert results(again) == results(graded["merged"])
    assert json.loads((again / "run.json").read_text(encoding="utf-8"))["learners"] == sorted(COHORT)


def test_merging_checks_the_shards_belong_together(graded, tmp_path, capsys):
    one, two = graded["shards"]
    assert cli_main(["grade-all", "--merge", str(one), "--out", str(tmp_path / "a")]) == 2
    assert "faltan 2/2" in capsys.readouterr().err
    assert cli_main(["grade-all", "--merge", str(one), str(one), "--out", str(tmp_path / "b")]) == 2
    assert "1/2, 1/2" in capsys.readouterr().err
    other = tmp_path / "other-seed"
    shutil.copytree(two, other)
    run = json.loads((other / "run.json").read_text(encoding="utf-8"))
    (other / "run.json").write_text(json.dumps({**run, "seed": run["seed"] + 1}), encoding="utf-8")
    assert cli_main(["grade-all", "--merge", str(one), str(other), "--out", str(tmp_path / "c")]) == 2
    assert "«seed»" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "c").exists()


# ------------------------------------------------------------------ resuming a killed run


def test_a_killed_run_resumes_without_regrading_what_it_finished(course, tmp_path):
    submissions = tmp_path / "submissions"
    lesson03_cohort(submissions, course, unprivileged=UNPRIVILEGED, only=("ana", "beto", "carla"))
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "autograder",
            "grade-all",
            str(submissions),
            "--out",
            str(out),
            "--jobs",
            "1",
            "--lessons",
            "03",
            "--seed",
            str(SEED),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        end = time.monotonic() + RUN_TIMEOUT
        while not list((out / "records").glob("*.json")) and proc.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        children = children_of(proc.pid)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    _wait_gone(children)  # its grading processes die with it (and their workers with them)
    assert list(
        Path(tempfile.gettempdir()).glob(f"autograder-batch-{proc.pid}-*")
    )  # its scratch, left behind
    done = records(out)
    assert 1 <= len(done) < 3, sorted(done)
    for path in (out / "results").glob("*.json"):  # whole files only
        json.loads(path.read_text(encoding="utf-8"))
    assert set(done) <= set(results(out))
    before = {learner: (out / "records" / f"{learner}.json").stat().st_mtime_ns for learner in done}

    resumed = grade_all(submissions, "--out", out, "--jobs", 1, "--lessons", "03")  # the seed: run.json's
    graded = 3 - len(done)  # the summary's plural form: "1 corregido", "2 corregidos"
    assert f"{graded} corregido{'s' if graded != 1 else ''}, {len(done)} sin cambios" in resumed.stdout, (
        resumed.stdout
    )
    assert set(records(out)) == {"ana", "beto", "carla"}
    for learner, stamp in before.items():
        assert (out / "records" / f"{learner}.json").stat().st_mtime_ns == stamp, learner
    assert not list(
        Path(tempfile.gettempdir()).glob(f"autograder-batch-{proc.pid}-*")
    )  # cleaned by the next run

    # A changed submission, and only it, is graded again.
    stamps = {learner: (out / "records" / f"{learner}.json").stat().st_mtime_ns for learner in records(out)}
    fixed = solution_files(course.lesson("03"))["attention.py"]
    (submissions / "carla" / "exercises" / "03-atencion-causal" / "attention.py").write_text(
        fixed, encoding="utf-8"
    )
    third = grade_all(submissions, "--out", out, "--jobs", 1, "--lessons", "03")
    assert "1 corregido, 2 sin cambios" in third.stdout, third.stdout
    assert results(out)["carla"]["score"] == results(out)["ana"]["score"]
    for learner, stamp in stamps.items():
        assert ((out / "records" / f"{learner}.json").stat().st_mtime_ns == stamp) == (learner != "carla"), (
            learner
        )
    assert read_csv(out / "grades.csv")[2]["raw_score"] == str(float(results(out)["ana"]["score"]))


def _wait_gone(pids: list[int], seconds: float = 20) -> None:
    end = time.monotonic() + seconds
    while (living := alive(pids)) and time.monotonic() < end:
        time.sleep(0.1)
    assert not living, f"still running: {sorted(living)}"


# ------------------------------------------------------------------ crashes and time limits


def test_a_crashed_or_overlong_grading_costs_only_that_learner(course, tmp_path):
    """aaron's forward() never returns. His grading process is killed from outside while it
    grades him (as the kernel's OOM killer would): an error for him, and a fresh process grades
    bea. The rerun retries him, and this time the per-learner limit stops him."""
    submissions = tmp_path / "submissions"
    forever_hanging(submissions / "aaron", course)
    lesson03_cohort(submissions, course, unprivileged=UNPRIVILEGED, only=("ana",))
    (submissions / "ana").rename(submissions / "bea")
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "autograder",
            "grade-all",
            str(submissions),
            "--out",
            str(out),
            "--jobs",
            "1",
            "--lessons",
            "03",
            "--seed",
            str(SEED),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        end = time.monotonic() + 300
        # aaron's worker, named once his forward() starts (or his sleeper): he is being graded
        while not tagged_processes(HANG_MARK, HANG_NAME) and time.monotonic() < end:
            time.sleep(0.1)
        assert tagged_processes(HANG_MARK, HANG_NAME), "aaron's grading never started"
        graders = [
            pid for pid in children_of(proc.pid) if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
        ]
        assert len(graders) == 1, graders
        os.kill(graders[0], signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        proc.kill()
    assert proc.returncode == 0, stdout + stderr
    assert "1 corregido, 0 sin cambios, 1 con error" in stdout, stdout
    first = records(out)
    assert first["aaron"]["status"] == "error" and first["aaron"]["error"] == "crashed"
    assert "SIGKILL" in first["aaron"]["detail"]
    assert first["bea"]["status"] == "graded" and results(out)["bea"]["xp"] == 50
    aaron = results(out)["aaron"]
    assert {c["status"] for c in aaron["lessons"][0]["checks"]} == {"error"} and aaron["score"] == 0
    assert "murió (SIGKILL)" in aaron["lessons"][0]["checks"][0]["message"]
    assert "aaron" in (out / "report.md").read_text(encoding="utf-8")
    no_survivors()

    again = grade_all(submissions, "--out", out, "--jobs", 1, "--lessons", "03", "--learner-timeout", 15)
    assert "0 corregidos, 1 sin cambios, 1 con error" in again.stdout, again.stdout
    second = records(out)
    assert second["aaron"]["error"] == "timeout" and 15 <= second["aaron"]["seconds"] < 60
    assert "(15 s)" in results(out)["aaron"]["lessons"][0]["checks"][0]["message"]
    # ...and says which check his code hung in: one that runs his forward(), not the NumPy file's.
    hung = re.search(
        r"se detuvo en la comprobación (\S+) de la lección 03",
        results(out)["aaron"]["lessons"][0]["checks"][0]["message"],
    )
    assert hung and hung.group(1) in {spec.id for spec in course.lesson("03").checks}, hung
    assert not hung.group(1).startswith("np-") and hung.group(0) in (out / "report.md").read_text(
        encoding="utf-8"
    )
    assert [r["status"] for r in read_csv(out / "cohort.csv")] == ["error:timeout", "graded"]
    no_survivors()


# ------------------------------------------------------------------ the roster


def test_the_roster_clones_updates_and_reports_bad_repositories(course, tmp_path):
    lesson = course.lesson("01")
    remotes = tmp_path / "remotes"
    remotes.mkdir()
    bare_remote(remotes, "ana", lesson, solution_files(lesson), tag="entrega-1")
    bare_remote(remotes, "beto", lesson, stub_files(lesson))
    roster = tmp_path / "roster.csv"
    submissions, out = tmp_path / "submissions", tmp_path / "out"
    allow = ("--allow-scheme", "http", "--allow-host", "127.0.0.1")
    with served(remotes) as base:
        roster.write_text(
            "id,name,email,url,ref\n"
            f"ana,Ana García López,ana@example.org,{base}/ana.git,entrega-1\n"
            f"beto,Beto Ruiz,beto@example.org,{base}/beto.git,\n"
            f"carla,Carla Gil,carla@example.org,{base}/no-existe.git,\n"
            f"dario,Darío Sanz,dario@example.org,{base}/ana.git,no-such-ref\n",
            encoding="utf-8",
        )
        # After the tag, ana pushes more work: the roster's ref pins what is graded.
        commit(remotes / "ana-work", lesson, stub_files(lesson), "después de la entrega")

        first = grade_all(
            submissions,
            "--roster",
            roster,
            "--out",
            out,
            "--lessons",
            "01",
            "--jobs",
            2,
            "--seed",
            SEED,
            *allow,
        )
        assert "2 corregidos, 0 sin cambios, 2 con error" in first.stdout, first.stdout + first.stderr
        assert "carla: no se pudo obtener el repositorio" in first.stderr
        got = records(out)
        assert (got["carla"]["status"], got["carla"]["error"]) == ("error", "fetch")
        assert (got["dario"]["status"], got["dario"]["error"]) == ("error", "fetch")
        assert "no-such-ref" in got["dario"]["detail"]
        assert "no-existe.git" in results(out)["carla"]["lessons"][0]["checks"][0]["message"]
        assert not (submissions / "carla").exists()  # nothing half-cloned is left
        tagged = subprocess.run(
            ["git", "rev-parse", "entrega-1^{commit}"],
            cwd=remotes / "ana-work",
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert got["ana"]["commit"] == tagged
        assert results(out)["ana"]["xp"] == 50 and results(out)["beto"]["score"] == 0
        assert (got["ana"]["first_name"], got["ana"]["last_name"], got["ana"]["email"]) == (
            "Ana",
            "García López",
            "ana@example.org",
        )
        by_id = {r["student_id"]: r for r in read_csv(out / "grades.csv")}
        assert by_id["ana"]["last_name"] == "García López" and by_id["ana"]["timestamp"]
        assert by_id["carla"]["raw_score"] == "0.0"

        # beto pushes his solution: the rerun fetches it and regrades him alone (the failed
        # fetches are tried again, and fail again).
        commit(remotes / "beto-work", lesson, solution_files(lesson), "resuelto")
        ana_stamp = (out / "records" / "ana.json").stat().st_mtime_ns
        second = grade_all(
            submissions, "--roster", roster, "--out", out, "--lessons", "01", "--jobs", 2, *allow
        )
        assert "1 corregido, 1 sin cambios, 2 con error" in second.stdout, second.stdout + second.stderr
        assert results(out)["beto"]["xp"] == 50
        assert (out / "records" / "ana.json").stat().st_mtime_ns == ana_stamp


# ------------------------------------------------------------------ bad input


def test_bad_input_is_refused_with_a_message_before_any_grading(tmp_path, capsys):
    subs = tmp_path / "subs"
    (subs / "ana").mkdir(parents=True)
    cases = [
        (["grade-all", str(subs), "--out", str(tmp_path / "o"), "--shard", "3/2"], "--shard 3/2"),
        (["grade-all", str(subs), "--out", str(subs / "notas")], "está dentro de"),
        (["grade-all", str(tmp_path / "nada"), "--out", str(tmp_path / "o")], "no es una carpeta"),
        (["grade-all", "--out", str(tmp_path / "o")], "Falta la carpeta SUBMISSIONS"),
        (["grade-all", str(subs), "--out", str(tmp_path / "o"), "--jobs", "0"], "--jobs 0"),
    ]
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name,email\nana,Ana,ana@example.org\n", encoding="utf-8")
    cases.append(
        (
            ["grade-all", str(subs), "--roster", str(roster), "--out", str(tmp_path / "o")],
            f"{roster}:1: a la cabecera le falta la columna url",
        )
    )
    twice = tmp_path / "twice.csv"
    twice.write_text(
        "id,url\nana,https://github.com/a/a.git\nana,https://github.com/a/b.git\n", encoding="utf-8"
    )
    cases.append(
        (
            ["grade-all", str(subs), "--roster", str(twice), "--out", str(tmp_path / "o")],
            f"{twice}:3: el id «ana» aparece dos veces",
        )
    )
    dash = tmp_path / "dash.csv"
    dash.write_text(
        "id,url,ref\nana,https://github.com/a/a.git,--upload-pack=touch pwned\n", encoding="utf-8"
    )
    cases.append(
        (
            ["grade-all", str(subs), "--roster", str(dash), "--out", str(tmp_path / "o")],
            f"{dash}:2: la columna ref no puede empezar por un guion",
        )
    )
    for argv, expected in cases:
        assert cli_main(argv) == 2, argv
        assert expected in capsys.readouterr().err, argv
    english = ["grade-all", str(subs), "--out", str(tmp_path / "o"), "--shard", "0/2", "--lang", "en"]
    assert cli_main(english) == 2 and "write I/N" in capsys.readouterr().err
    assert not (tmp_path / "o").exists() and sorted(p.name for p in subs.iterdir()) == ["ana"]


def test_the_batch_catalogs_match():
    """Placeholders: tests/render/test_render.py checks every catalog's."""
    from autograder.core import i18n

    es, en = i18n.catalog("es"), i18n.catalog("en")
    keys = [key for key in es if key.startswith("batch.")]
    assert len(keys) > 40 and {key for key in en if key.startswith("batch.")} == set(keys)


# ------------------------------------------------------------------ an untouched copy, every lesson


@pytest.fixture(scope="module")
def untouched(course, tmp_path_factory) -> Path:
    """grade-all on every lesson: "nadie" hands in the course's exercises/ untouched, "zoe" only
    a lesson 03 whose forward() raises an error made of Markdown and escape sequences."""
    from support.hostile_snippets import hostile_attention

    base = tmp_path_factory.mktemp("untouched")
    submissions, out = base / "submissions", base / "out"
    shutil.copytree(ROOT / "exercises", submissions / "nadie" / "exercises")
    write_submission(
        submissions / "zoe" / "exercises" / course.lesson("03").folder, hostile_attention(course.lesson("03"))
    )
    proc = grade_all(submissions, "--out", out, "--jobs", 2, "--seed", SEED)
    assert "\x1b" not in proc.stdout + proc.stderr
    return out


def test_an_untouched_copy_has_started_no_todo_of_any_lesson(untouched, course):
    from autograder.cohort.report import load, todo_state
    from autograder.cohort.store import Store

    store = Store(untouched)
    run = store.read_run()
    assert run["lessons"] == [lesson.id for lesson in course.lessons]
    cohort = load(course, run, store)
    nadie = next(entry for entry in cohort.entries if entry.record.learner == "nadie")
    states = {
        (lesson.id, todo.id): todo_state(nadie, lesson, todo.id)
        for lesson in cohort.lessons
        for todo in lesson.todos
    }
    assert set(states.values()) == {"pending"}, states  # targets-shift, loss-reshape, top-k... too
    report = (untouched / "report.md").read_text(encoding="utf-8")
    table = report.split("## ¿En qué TODO se atascan?")[1].split("\n## ")[0]
    rows = {
        cells[0].strip("`"): cells
        for cells in (
            [c.strip() for c in line.strip("|").split("|")]
            for line in table.splitlines()
            if line.startswith("| `")
        )
    }
    assert set(rows) == {todo.id for lesson in course.lessons for todo in lesson.todos}
    for todo, cells in rows.items():
        # zoe has only lesson 03: every other lesson's TODOs are not started by both.
        assert cells[3] == "2 (100 %)" if cells[1] != "03" else cells[3] in ("1 (50 %)", "2 (100 %)"), cells


def test_quizzes_and_informational_checks_are_apart(untouched, course):
    report = (untouched / "report.md").read_text(encoding="utf-8")
    checks = report.split("## Comprobaciones\n")[1].split("\n## ")[0]
    assert "quiz-" not in checks and "own-pieces" not in checks
    apart = report.split("## Cuestionarios y comprobaciones informativas\n")[1].split("\n## ")[0]
    rows = [line for line in apart.splitlines() if line.startswith("| ") and "---" not in line][1:]
    quizzes = [row for row in rows if row.startswith("| cuestionario")]
    own = [row for row in rows if "`own-pieces` · informativa" in row]
    assert len(quizzes) == sum(1 for lesson in course.lessons if lesson.quiz) and len(rows) == len(
        quizzes
    ) + len(own)
    assert len(own) == sum(1 for lesson in course.lessons for spec in lesson.checks if spec.informational)
    # An untouched copy's quizzes are blank, and its own pieces wait on a TODO not started.
    assert all(row.rstrip(" |").endswith("(100 %)") or "| 03 |" in row for row in quizzes + own), rows


def test_a_learners_error_text_arrives_inert_in_the_report_and_results(untouched):
    zoe = json.loads((untouched / "results" / "zoe.json").read_text(encoding="utf-8"))
    messages = "\n".join(c["message"] for lesson in zoe["lessons"] for c in lesson["checks"])
    assert "## ✔ XP 300/300" in messages  # the attack ran; the JSON keeps the learner's words
    report = (untouched / "report.md").read_text(encoding="utf-8")
    assert "\x1b" not in report and "XP 300/300" not in report
