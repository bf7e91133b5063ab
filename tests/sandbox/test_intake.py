"""Submission intake (autograder/sandbox/intake.py): a learner never gets points, nor stops
anyone else's grading, by committing symlinks; the roster fetches only from where the
instructor allows.

With real symlinks, FIFOs and /proc, real git (bare remotes served over HTTP on 127.0.0.1,
tests/support/cohort_factory.py) and the real engine and `autograder grade-all` where it matters.
Grading is of lesson 01 only, which takes a few seconds.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support.cohort_factory import GIT, grade_all, push, records, results, served
from support.grading import write_submission
from support.project import SEED
from support.variants import solution_files

from autograder.cli import main as cli_main
from autograder.cohort.roster import Allowed, Learner, fetch, learners_in, url_origin
from autograder.cohort.store import content_hash
from autograder.engine.grading import grade, lesson_submission_dir, own_files
from autograder.sandbox import intake

LOCAL_HTTP = ("--allow-scheme", "http", "--allow-host", "127.0.0.1")
pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="module")
def lesson01(course):
    return course.lesson("01")


def private_solutions(base: Path, lesson) -> Path:
    """The instructor's workspace beside submissions/: a folder of finished lesson folders
    (as the private course's solutions/, without region markers), which score full marks."""
    folder = base / "private" / "solutions"
    write_submission(folder / lesson.folder, solution_files(lesson))
    return folder


def messages(result: dict) -> str:
    return "\n".join(check["message"] or "" for lesson in result["lessons"] for check in lesson["checks"])


# ------------------------------------------------------------------ the walk and the reads


def test_contained_refuses_a_symlink_at_any_level_below_the_boundary(tmp_path):
    real = tmp_path / "real"
    (real / "a" / "b").mkdir(parents=True)
    (real / "a" / "b" / "f.py").write_text("x = 1\n")
    (real / "a" / "link").symlink_to(real / "a" / "b", target_is_directory=True)
    (real / "a" / "b" / "file-link.py").symlink_to(real / "a" / "b" / "f.py")
    boundary = tmp_path / "chosen"
    boundary.symlink_to(real, target_is_directory=True)  # the boundary itself: the user chose it

    assert intake.contained(boundary, boundary)
    assert intake.contained(boundary, boundary / "a" / "b" / "f.py")
    assert not intake.contained(boundary, boundary / "a" / "link")  # the path itself
    assert not intake.contained(boundary, boundary / "a" / "link" / "f.py")  # a folder above it
    assert not intake.contained(boundary, boundary / "a" / "b" / "file-link.py")
    assert not intake.contained(boundary, boundary / "a" / "missing.py")
    assert not intake.contained(boundary, boundary / "a" / ".." / "a" / "b")
    assert not intake.contained(boundary / "a", boundary / "elsewhere")
    assert not intake.contained(real / "a" / "b", real)


def test_the_walk_copies_regular_files_only_and_never_raises(tmp_path):
    src = tmp_path / "src"
    write_submission(src, {"data.py": "x = 1\n"})
    write_submission(src / "pkg", {"helper.py": "y = 2\n"})
    write_submission(src / "pkg" / "__pycache__", {"helper.pyc": "\0"})
    outside = write_submission(tmp_path / "outside", {"secret.py": "SECRET = 1\n"})
    (src / "linked-file.py").symlink_to(outside / "secret.py")
    (src / "linked-folder").symlink_to(outside, target_is_directory=True)
    (src / "pkg" / "proc").symlink_to("/proc/self/attr", target_is_directory=True)
    os.mkfifo(src / "fifo.py")
    deep = src.joinpath(*["d"] * 300)  # deeper than any recursion would like
    write_submission(deep, {"leaf.py": "z = 3\n"})

    dest = tmp_path / "dest"
    intake.copy_submission(src, dest)
    copied = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert copied == ["/".join(["d"] * 300 + ["leaf.py"]), "data.py", "pkg/helper.py"]
    assert not any(p.is_symlink() for p in dest.rglob("*"))
    # The walk's order is that of sorted paths, and the hash reads exactly what the copy wrote.
    assert [p.relative_to(src).as_posix() for p in intake.submission_files(src)] == sorted(copied)
    assert dict(intake.read_files(src)) == {rel: (dest / rel).read_bytes() for rel in copied}

    # Odd folders are missing folders: no exception, nothing read.
    (tmp_path / "fifo-folder").mkdir()
    os.mkfifo(tmp_path / "fifo-folder" / "lesson")
    for odd in (
        Path("/proc/self/attr"),
        Path("/proc/self/attr/current"),
        tmp_path / "fifo-folder" / "lesson",
        src / "data.py",
        tmp_path / "missing",
        intake.refused(src),
    ):
        assert list(intake.read_files(odd)) == [], odd
        intake.copy_submission(odd, tmp_path / "odd-copy")
    assert list((tmp_path / "odd-copy").iterdir()) == []


def test_a_file_is_read_only_through_a_descriptor_that_follows_nothing(tmp_path):
    real = tmp_path / "real.py"
    real.write_text("x = 1\n")
    (tmp_path / "link.py").symlink_to(real)
    os.mkfifo(tmp_path / "fifo.py")  # opened without blocking, and never read
    (tmp_path / "big.py").write_bytes(b"#" * (intake.MAX_FILE_BYTES + 1))
    assert intake.read_no_follow(real) == b"x = 1\n"
    for path in ("link.py", "fifo.py", "big.py", "missing.py"):
        assert intake.read_no_follow(tmp_path / path) is None, path
    assert intake.read_no_follow(Path("/proc/self/status")) is None  # a kernel file, never a learner's
    assert intake.read_no_follow(Path("/dev/zero")) is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads unreadable folders")
def test_an_unreadable_folder_is_a_missing_one(tmp_path):
    src = write_submission(tmp_path / "src", {"data.py": "x = 1\n"})
    write_submission(src / "closed", {"hidden.py": "y = 2\n"})
    (src / "closed").chmod(0)
    try:
        assert [rel for rel, _ in intake.read_files(src)] == ["data.py"]
        assert list(intake.read_files(src / "closed")) == []
    finally:
        (src / "closed").chmod(0o755)


# ------------------------------------------------------------------ the engine's lookups


def test_the_engine_never_looks_up_a_learners_file_through_a_link(course, tmp_path):
    lesson04, lesson03 = course.lesson("04"), course.lesson("03")
    learner = tmp_path / "ana"
    exercises = learner / "exercises"
    write_submission(exercises / lesson04.folder, {"model.py": "x = 1\n"})
    own03 = write_submission(
        exercises / lesson03.folder, {"attention.py": "a = 1\n", "attention_numpy.py": "b = 1\n"}
    )
    assert own_files(course, lesson04, exercises / lesson04.folder, boundary=learner) == {
        "attention.py": own03 / "attention.py",
        "attention_numpy.py": own03 / "attention_numpy.py",
    }

    elsewhere = write_submission(tmp_path / "elsewhere", {"attention.py": "a = 2\n"})
    (own03 / "attention.py").unlink()
    (own03 / "attention.py").symlink_to(elsewhere / "attention.py")
    assert own_files(course, lesson04, exercises / lesson04.folder, boundary=learner) is None

    (own03 / "attention.py").unlink()
    (own03 / "attention.py").write_text("a = 1\n")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "exercises").symlink_to(exercises, target_is_directory=True)
    lesson_dir = lesson_submission_dir(course, lesson04, linked / "exercises", False, boundary=linked)
    assert not lesson_dir.exists() and lesson_dir.name == lesson04.folder
    assert own_files(course, lesson04, lesson_dir, boundary=linked) is None
    assert own_files(course, lesson04, linked / "exercises" / lesson04.folder, boundary=linked) is None
    # The folder the user chose may itself be a link: it is the boundary.
    assert lesson_submission_dir(course, lesson04, linked / "exercises", False) == (
        linked / "exercises" / lesson04.folder
    )

    # A learner's exercises/ that is a link is neither followed nor passed over for the folder.
    assert Learner("ana", learner).exercises == exercises
    assert Learner("linked", linked).exercises == linked / "exercises"
    assert Learner("flat", exercises).exercises == exercises  # a folder that is exercises/ itself


def test_a_symlinked_lesson_hashes_as_a_missing_one(course, lesson01, tmp_path):
    solutions = private_solutions(tmp_path, lesson01)
    lesson04 = course.lesson("04")
    honest, linked, empty = (tmp_path / name for name in ("honest", "linked", "empty"))
    write_submission(honest / "exercises" / lesson01.folder, solution_files(lesson01))
    (linked / "exercises").mkdir(parents=True)
    (linked / "exercises" / lesson01.folder).symlink_to(solutions / lesson01.folder, target_is_directory=True)
    (empty / "exercises").mkdir(parents=True)

    def key(folder: Path, lessons=(lesson01,)) -> str:
        return content_hash(course, list(lessons), folder / "exercises", boundary=folder)

    assert key(linked) == key(empty) != key(honest)
    # The same for exercises/ itself as a link, and for the learner's own earlier lesson that a
    # later one uses (04 uses 03's files).
    whole = tmp_path / "whole"
    whole.mkdir()
    (whole / "exercises").symlink_to(honest / "exercises", target_is_directory=True)
    assert content_hash(course, [lesson01], Learner("w", whole).exercises, boundary=whole) == key(empty)
    lesson03 = course.lesson("03")
    for folder in (linked, empty):
        write_submission(folder / "exercises" / lesson04.folder, {"model.py": "x = 1\n"})
    write_submission(tmp_path / "real03", {"attention.py": "a = 1\n"})
    (linked / "exercises" / lesson03.folder).symlink_to(tmp_path / "real03", target_is_directory=True)
    assert key(linked, [lesson04]) == key(empty, [lesson04])


def test_a_lesson_folder_linked_to_the_solutions_scores_as_missing_files(course, lesson01, tmp_path):
    solutions = private_solutions(tmp_path, lesson01)
    learner = tmp_path / "ana"
    (learner / "exercises").mkdir(parents=True)
    (learner / "exercises" / lesson01.folder).symlink_to(
        solutions / lesson01.folder, target_is_directory=True
    )
    # Not the folder but each file a link: none of them is copied.
    files_only = tmp_path / "beto"
    (files_only / "exercises" / lesson01.folder).mkdir(parents=True)
    for name in solution_files(lesson01):
        (files_only / "exercises" / lesson01.folder / name).symlink_to(solutions / lesson01.folder / name)

    for folder in (learner, files_only):
        result = grade(course, [lesson01], folder / "exercises", seed=SEED, boundary=folder).lessons[0]
        assert result.score == 0 and result.max_score == 100, folder
        keys = {
            getattr(check.feedback.parts[0], "key", None) for check in result.checks if check.feedback.parts
        }
        assert "engine.missing_file" in keys, (folder, keys)
    # The control: the same files, really there, get every point.
    control = tmp_path / "carla"
    write_submission(control / "exercises" / lesson01.folder, solution_files(lesson01))
    result = grade(course, [lesson01], control / "exercises", seed=SEED, boundary=control).lessons[0]
    assert result.score == result.max_score == 100


# ------------------------------------------------------------------ grade-all


def test_links_and_odd_folders_cost_only_their_learner_in_grade_all(course, lesson01, tmp_path):
    solutions = private_solutions(tmp_path, lesson01)
    submissions, out = tmp_path / "submissions", tmp_path / "out"
    write_submission(submissions / "ana" / "exercises" / lesson01.folder, solution_files(lesson01))
    (submissions / "beto" / "exercises").mkdir(parents=True)  # poisoned: its lesson is a kernel folder
    (submissions / "beto" / "exercises" / lesson01.folder).symlink_to(
        "/proc/self/attr", target_is_directory=True
    )
    (submissions / "carla").mkdir()  # exercises/ points at the private course beside submissions/
    (submissions / "carla" / "exercises").symlink_to("../../private/solutions", target_is_directory=True)
    (submissions / "dario").symlink_to(solutions.parent, target_is_directory=True)  # the whole folder
    assert (submissions / "carla" / "exercises" / lesson01.folder / "data.py").is_file()

    proc = grade_all(submissions, "--out", out, "--lessons", "01", "--jobs", 2, "--seed", SEED, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 corregidos, 0 sin cambios, 1 con error" in proc.stdout, proc.stdout + proc.stderr
    got, recs = results(out), records(out)
    assert sorted(got) == ["ana", "beto", "carla", "dario"]
    assert got["ana"]["score"] == 100 and got["ana"]["xp"] == 50
    for poisoned in ("beto", "carla"):
        assert recs[poisoned]["status"] == "graded" and got[poisoned]["score"] == 0, poisoned
        assert "No encuentro el archivo data.py" in messages(got[poisoned]), poisoned
    assert (recs["dario"]["status"], recs["dario"]["error"]) == ("error", "link")
    assert "enlace simbólico" in messages(got["dario"]) and got["dario"]["score"] == 0
    assert f"dario: {submissions / 'dario'} es un enlace simbólico" in proc.stderr


def test_a_committed_exercises_link_is_cloned_as_a_plain_file_and_scores_nothing(course, lesson01, tmp_path):
    private_solutions(tmp_path, lesson01)
    remotes = tmp_path / "remotes"
    remotes.mkdir()
    subprocess.run([*GIT, "init", "-q", "--bare", str(remotes / "ana.git")], check=True)
    work = remotes / "ana-work"
    subprocess.run(
        [*GIT, "clone", "-q", str(remotes / "ana.git"), str(work)], check=True, capture_output=True
    )
    # From submissions/ana/, this reaches the private course beside submissions/.
    (work / "exercises").symlink_to("../../private/solutions", target_is_directory=True)
    subprocess.run([*GIT, "add", "-A"], cwd=work, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "sin código"], cwd=work, check=True)
    push(work, "HEAD:main")
    submissions, out, roster = tmp_path / "submissions", tmp_path / "out", tmp_path / "roster.csv"

    with served(remotes) as base:
        roster.write_text(f"id,name,url\nana,Ana,{base}/ana.git\n", encoding="utf-8")
        proc = grade_all(
            submissions,
            "--roster",
            roster,
            "--out",
            out,
            "--lessons",
            "01",
            "--seed",
            SEED,
            "--jobs",
            1,
            *LOCAL_HTTP,
            check=False,
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checked_out = submissions / "ana" / "exercises"
    assert not checked_out.is_symlink() and checked_out.read_text() == "../../private/solutions"
    assert results(out)["ana"]["score"] == 0 and records(out)["ana"]["status"] == "graded"


# ------------------------------------------------------------------ the roster's git and URLs


def test_fetching_runs_no_hooks_checks_links_out_as_files_and_keeps_rewrites_to_allowed_schemes(
    lesson01, tmp_path, monkeypatch
):
    remotes = tmp_path / "remotes"
    remotes.mkdir()
    subprocess.run([*GIT, "init", "-q", "--bare", str(remotes / "ana.git")], check=True)
    work = remotes / "ana-work"
    subprocess.run(
        [*GIT, "clone", "-q", str(remotes / "ana.git"), str(work)], check=True, capture_output=True
    )
    write_submission(work / "exercises" / lesson01.folder, solution_files(lesson01))
    (work / "passwd.py").symlink_to("/etc/passwd")
    subprocess.run([*GIT, "add", "-A"], cwd=work, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "uno"], cwd=work, check=True)
    push(work, "HEAD:main")
    folder = tmp_path / "submissions" / "ana"
    local = Allowed(("http",), ("127.0.0.1",))

    with served(remotes) as base:
        learner = Learner("ana", folder, url=f"{base}/ana.git")
        fetch(learner, local)
        assert learner.problem is None and learner.commit
        assert not (folder / "passwd.py").is_symlink() and (folder / "passwd.py").read_text() == "/etc/passwd"
        # A hook left in the clone (a learner's folder from an earlier run) never runs.
        marker = tmp_path / "hook-ran"
        hook = folder / ".git" / "hooks" / "post-checkout"
        hook.parent.mkdir(exist_ok=True)
        hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
        hook.chmod(0o755)
        fetch(learner, local)
        assert learner.problem is None and not marker.exists()

        # The instructor's own rewrite (a token, a mirror) keeps working when it lands on an
        # allowed scheme, and is refused by git when it does not.
        monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
        monkeypatch.setenv("GIT_CONFIG_KEY_0", f"url.{base}/.insteadOf")
        monkeypatch.setenv("GIT_CONFIG_VALUE_0", "https://github.com/cohorte/")
        rewritten = Learner("ana", folder, url="https://github.com/cohorte/ana.git")
        fetch(rewritten, Allowed(("https", "http"), ("github.com",)))
        assert rewritten.problem is None and rewritten.commit == learner.commit
        refused = Learner("ana", folder, url="https://github.com/cohorte/ana.git")
        fetch(refused, Allowed())
        assert refused.problem is not None and "transport 'http' not allowed" in refused.problem[1]

    # Never a local repository, even if a Learner is made with one (read_roster refuses them).
    for url in (f"file://{remotes / 'ana.git'}", str(remotes / "ana.git")):
        other = Learner("beto", tmp_path / "submissions" / "beto", url=url)
        fetch(other, Allowed(("https", "ssh", "http"), ("127.0.0.1", "localhost")))
        assert other.problem[0] == "fetch" and not other.folder.exists(), url


def test_the_roster_refuses_urls_the_instructor_did_not_allow(tmp_path, capsys):
    assert url_origin("git@github.com:ana/curso.git") == ("ssh", "github.com")
    assert url_origin("https://ana:tok@GitHub.com:443/ana/curso.git") == ("https", "github.com")
    for local in (
        "/srv/clones/beto",
        "../beto",
        "./a:b",
        "file:///srv/beto.git",
        "ext::sh -c touch% /tmp/x",
        "fd::7",
        "https://github.com\\@evil.example/x",
        "https:///x",
        "",
        "C:\\clones\\beto",
    ):
        assert url_origin(local) is None, local

    subs = tmp_path / "subs"
    subs.mkdir()
    cases = [
        (
            "file:///srv/beto.git",
            [],
            "no es la url de un repositorio remoto",
            "solo admite https en github.com",
        ),
        ("/srv/clones/beto", [], "no es la url de un repositorio remoto", "/srv/clones/beto"),
        (
            "../beto/.git",
            ["--allow-scheme", "https", "--allow-scheme", "ssh"],
            "no es la url de un repositorio remoto",
            "solo admite https, ssh en github.com",
        ),
        ("http://evil.example/ana.git", [], "usa http, y la lista solo admite https", "--allow-scheme http"),
        (
            "http://evil.example/ana.git",
            ["--allow-scheme", "https", "--allow-scheme", "http"],
            "apunta a evil.example",
            "--allow-host evil.example",
        ),
        (
            "git@evil.example:ana/curso.git",
            ["--allow-scheme", "https", "--allow-scheme", "ssh"],
            "apunta a evil.example",
            "solo admite github.com",
        ),
        (
            "https://ana:s3cret@gitlab.example.org/ana.git",
            [],
            "«https://***@gitlab.example.org/ana.git»",
            "apunta a gitlab.example.org",
        ),
    ]
    for number, (url, options, *expected) in enumerate(cases):
        roster = tmp_path / f"roster-{number}.csv"
        roster.write_text(
            f"id,name,url\nana,Ana,https://github.com/ana/curso.git\nbeto,Beto,{url}\n", encoding="utf-8"
        )
        argv = ["grade-all", str(subs), "--roster", str(roster), "--out", str(tmp_path / "o"), *options]
        assert cli_main(argv) == 2, url
        err = capsys.readouterr().err
        assert f"{roster}:3: " in err and all(text in err for text in expected), (url, err)
        assert "s3cret" not in err
    english = tmp_path / "english.csv"
    english.write_text("id,url\nana,file:///srv/ana.git\n", encoding="utf-8")
    assert (
        cli_main(
            ["grade-all", str(subs), "--roster", str(english), "--out", str(tmp_path / "o"), "--lang", "en"]
        )
        == 2
    )
    assert f'{english}:2: "file:///srv/ana.git" is not a remote repository URL' in capsys.readouterr().err
    assert (
        cli_main(
            [
                "grade-all",
                str(subs),
                "--roster",
                str(english),
                "--out",
                str(tmp_path / "o"),
                "--allow-host",
                "https://github.com",
            ]
        )
        == 2
    )
    assert "--allow-host https://github.com: escribe solo el nombre del servidor" in capsys.readouterr().err
    # Refused before anything is fetched or written.
    assert list(subs.iterdir()) == [] and not (tmp_path / "o").exists()


def test_a_learner_folder_that_is_a_link_is_reported_not_followed(tmp_path):
    subs = tmp_path / "subs"
    write_submission(subs / "ana", {"data.py": "x = 1\n"})
    (subs / "beto").symlink_to(subs / "ana", target_is_directory=True)
    (subs / "notes.txt").symlink_to(subs / "ana" / "data.py")  # not a folder: not a learner
    (subs / "-bad").symlink_to(subs / "ana", target_is_directory=True)
    learners, skipped = learners_in(subs)
    assert [(learner.id, learner.problem) for learner in learners] == [
        ("ana", None),
        ("beto", ("link", str(subs / "beto"))),
    ]
    assert skipped == ["-bad"]
