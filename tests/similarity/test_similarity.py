"""`autograder similarity` on a hand-made cohort of lesson 03 (no grading): learners' folders built
from the course's solutions and the lesson's catalog of correct-but-different variants, a copied
submission, a copy with renamed variables and reordered statements, and git repositories, one
of them pushed from another learner's history. The copies are flagged, the independent learners
are not; bad input is reported clearly; the reports are escaped, spreadsheet-safe and private.

The cohort and one run of the command are built once for the module (~3 s)."""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import stat
import subprocess
from itertools import combinations
from pathlib import Path

import pytest
from lessons.lesson03_variants import CORRECT
from support.project import ROOT
from support.variants import solution_files

from autograder import cli
from autograder.cohort.store import Record, Store
from autograder.core.manifest import load_course
from autograder.core.neutral import formula_like
from autograder.similarity import compare, history, own_code
from autograder.similarity.report import CSV_FILE, FOLDER, HTML_FILE

LESSON = "03"
HOSTILE_NAME = "<script>alert('name')</script>"
FORMULA_NAME = '=HYPERLINK("http://x")'
HOSTILE_LINE = '        banner = "</td></tr></table><script>alert(1)</script>\u202e"'
INDEPENDENT = [f"ind{i}" for i in range(8)]


def _combination(files: dict[str, str], variants) -> dict[str, str]:
    files = dict(files)
    for variant in variants:
        if all(files[variant.file].count(find) == 1 for find, _ in variant.substitutions):
            files.update(variant.apply(files))
    return files


def _independent_solutions(base: dict[str, str], count: int) -> list[dict[str, str]]:
    """`count` correct solutions, the i-th with the catalog's correct variants 2i and 2i+1 (those
    that apply together): different learners who each wrote a few things their own way."""
    assert 2 * count <= len(CORRECT)
    found = [_combination(base, CORRECT[2 * i : 2 * i + 2]) for i in range(count)]
    assert all(a != b for a, b in combinations([base, *found], 2))
    return found


def renamed_and_reordered(files: dict[str, str]) -> dict[str, str]:
    """A copy disguised: local names renamed everywhere, and statements of a TODO reordered."""
    renames = {
        "tril": "lower",
        "bs": "size",
        "att": "scores_",
        "hs": "head_dim",
        "future": "ahead",
        "e": "ex",
    }
    out = {}
    for name, text in files.items():
        for old, new in renames.items():
            text = re.sub(rf"\b{old}\b", new, text)
        out[name] = text
    attention = out["attention.py"]
    heads = [line for line in attention.splitlines() if re.match(r"\s+[qkv] = [qkv]\.view\(", line)]
    assert len(heads) == 3, heads  # the three head reshapes, reordered v, q, k
    block = "\n".join(heads)
    assert block in attention
    out["attention.py"] = attention.replace(block, "\n".join([heads[2], heads[0], heads[1]]))
    return out


def _write(folder: Path, files: dict[str, str]) -> None:
    target = folder / "exercises" / "03-atencion-causal"
    shutil.copytree(ROOT / "exercises" / "03-atencion-causal", target, dirs_exist_ok=True)
    for name, text in files.items():
        (target / name).write_text(text, encoding="utf-8")


def _git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
    }
    return subprocess.run(
        ["git", "-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always", *args],
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def _commit_and_push(clone: Path, files: dict[str, str], remote: Path) -> None:
    _write(clone, files)
    _git(clone, "add", "-A")
    _git(clone, "commit", "-q", "-m", "mi solución")
    _git(remote.parent, "init", "-q", "--bare", remote.name)
    _git(clone, "push", "-q", str(remote), "HEAD:refs/heads/main")


def run_similarity(notas: Path, *more: str) -> int:
    return cli.main(["--course", str(ROOT / "course.yml"), "similarity", str(notas), *more, "--lang", "en"])


@pytest.fixture(scope="module")
def cohort(tmp_path_factory):
    """SUBMISSIONS, NOTAS and the template clone of a 16-learner cohort, and the command run once."""
    course = load_course(ROOT / "course.yml")
    base = solution_files(course.lesson(LESSON))
    base = {name: base[name] for name in own_code.compared_files(course.lesson(LESSON))}
    root = tmp_path_factory.mktemp("cohort")
    subs, remotes, notas = root / "entregas", root / "remotes", root / "notas"
    subs.mkdir(), remotes.mkdir()
    solutions = _independent_solutions(base, len(INDEPENDENT) + 4)
    by_id = dict(zip(INDEPENDENT, solutions))
    hostile = by_id["ind0"]  # a line that tries to break out of the report, in a copied file
    hostile["attention.py"] = hostile["attention.py"].replace(
        "        B, T, C = x.size()\n", "        B, T, C = x.size()\n" + HOSTILE_LINE + "\n", 1
    )
    for learner, files in by_id.items():
        _write(subs / learner, files)
    _write(subs / "copy", by_id["ind0"])  # the whole submission copied
    _write(subs / "disguised", renamed_and_reordered(by_id["ind1"]))
    broken = dict(solutions[len(INDEPENDENT)])  # an independent learner whose file does not parse
    broken["attention_numpy.py"] = broken["attention_numpy.py"].replace("def ", "def (", 1)
    _write(subs / "broken", broken)
    (subs / "nothing" / "exercises").mkdir(parents=True)  # a learner with no files

    # Git: the hand-out in a bare repository; gita and gitc start from it; gitb from gita's history.
    handout = root / "handout-clone"
    handout.mkdir()
    _git(handout, "init", "-q")
    _write(handout, {})
    _git(handout, "add", "-A")
    _git(handout, "commit", "-q", "-m", "reparto")
    _git(remotes, "init", "-q", "--bare", "handout.git")
    _git(handout, "push", "-q", str(remotes / "handout.git"), "HEAD:refs/heads/main")
    for learner, source, files in (
        ("gita", remotes / "handout.git", solutions[len(INDEPENDENT) + 1]),
        ("gitc", remotes / "handout.git", solutions[len(INDEPENDENT) + 2]),
    ):
        work = root / f"work-{learner}"
        _git(root, "clone", "-q", str(source), str(work))
        _commit_and_push(work, files, remotes / f"{learner}.git")
    work = root / "work-gitb"  # pushed from gita's history, then its code rewritten
    _git(root, "clone", "-q", str(remotes / "gita.git"), str(work))
    _commit_and_push(work, solutions[len(INDEPENDENT) + 3], remotes / "gitb.git")
    for learner in ("gita", "gitb", "gitc"):
        _git(subs, "clone", "-q", str(remotes / f"{learner}.git"), learner)

    learners = sorted(p.name for p in subs.iterdir())
    store = Store(notas)
    store.write_run({"course": course.name, "lessons": [LESSON], "learners": learners})
    for learner in learners:
        first = {"copy": HOSTILE_NAME, "ind0": FORMULA_NAME}.get(learner, learner.capitalize())
        commit = _git(subs / learner, "rev-parse", "HEAD") if learner.startswith("git") else None
        store.save_record(Record(learner, "k", "graded", first, "Pérez", commit=commit))
    code = run_similarity(notas, str(subs), "--template", str(handout))
    folder = notas / FOLDER
    rows = list(csv.DictReader(io.StringIO((folder / CSV_FILE).read_text(encoding="utf-8"))))
    return {
        "code": code,
        "subs": subs,
        "notas": notas,
        "handout": handout,
        "rows": rows,
        "html": (folder / HTML_FILE).read_text(encoding="utf-8"),
        "learners": learners,
    }


def _flagged(rows, reason: str) -> set[tuple[str, str]]:
    return {(row["learner_a"], row["learner_b"]) for row in rows if reason in row["reason"].split("+")}


def test_the_copies_are_flagged_and_the_independent_learners_are_not(cohort):
    assert cohort["code"] == 0
    assert _flagged(cohort["rows"], "code") == {("copy", "ind0"), ("disguised", "ind1")}


def test_a_repository_pushed_from_another_learners_history_is_flagged(cohort):
    # The template's commit is in all three histories and is not evidence; gita's commit is.
    gita_commit = _git(cohort["subs"] / "gita", "rev-parse", "HEAD")
    (row,) = [row for row in cohort["rows"] if row["reason"] == "commits"]
    assert (row["learner_a"], row["learner_b"]) == ("gita", "gitb")
    assert row["shared_commits"].split() == [gita_commit]
    assert ("gita", "gitb") not in _flagged(cohort["rows"], "code")  # its code was rewritten


def test_without_the_template_the_commit_most_of_the_cohort_holds_is_the_hand_outs(cohort):
    subs = cohort["subs"]
    found = [history.history(name, subs / name, None) for name in ("gita", "gitb", "gitc", "ind0")]
    assert found[3].commits == set() and found[3].problem == "not a clone"
    shared, common = history.shared_commits(found)
    template = _git(cohort["handout"], "rev-parse", "HEAD")
    assert common == {template}
    assert list(shared) == [("gita", "gitb")]


def test_a_git_folder_that_points_elsewhere_lends_no_commits(cohort, tmp_path):
    """A `.git` that is a symlink to, or a `gitdir:` file naming, another learner's repository."""
    (tmp_path / "mallory").mkdir()
    (tmp_path / "mallory" / ".git").symlink_to(cohort["subs"] / "gita" / ".git")
    (tmp_path / "trudy").mkdir()
    (tmp_path / "trudy" / ".git").write_text(f"gitdir: {cohort['subs'] / 'gita' / '.git'}\n")
    for name in ("mallory", "trudy"):
        found = history.history(name, tmp_path / name, None)
        assert (found.commits, found.problem) == (set(), "not a clone")


def test_the_disguised_copy_scores_like_a_copy_not_like_the_cohort(cohort):
    course = load_course(ROOT / "course.yml")
    lesson = course.lesson(LESSON)
    stubs = own_code.stub_texts(course, lesson)
    owns = [own_code.own_code(name, cohort["subs"] / name, lesson, stubs) for name in cohort["learners"]]
    found = compare.compare_lesson(LESSON, owns, stubs)
    assert found.left_out == ["nothing"]
    by_pair = {(pair.a, pair.b): pair for pair in found.pairs}
    independent = [by_pair[pair].score for pair in combinations(INDEPENDENT, 2)]
    assert by_pair[("copy", "ind0")].score == 1.0
    assert by_pair[("disguised", "ind1")].score > max(independent) + 0.2
    # copydetect marks the matching lines of both sides
    disguised = by_pair[("disguised", "ind1")]
    assert disguised.lines_a and disguised.lines_b


def test_bad_files_are_reported_and_still_compared(cohort):
    html, rows = cohort["html"], cohort["rows"]
    assert re.search(r"broken: attention_numpy.py: syntax error \(\d+: [^)]+\); compared all the same", html)
    assert "No own code in this lesson (not compared): nothing" in html
    assert "broken" not in {name for row in rows for name in (row["learner_a"], row["learner_b"])}
    course = load_course(ROOT / "course.yml")
    lesson = course.lesson(LESSON)
    stubs = own_code.stub_texts(course, lesson)
    broken = own_code.own_code("broken", cohort["subs"] / "broken", lesson, stubs)
    assert any(file == "attention_numpy.py" and what.startswith("syntax: ") for file, what in broken.notes)
    assert any(line.file == "attention_numpy.py" for line in broken.lines)  # compared all the same


def test_the_html_report_escapes_learners_code_and_names(cohort):
    html = cohort["html"]
    assert "<script" not in html.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # the learner's line, shown inert
    assert "\u202e" not in html  # a bidirectional override is shown, never obeyed
    assert "\ufffd" in html
    assert html.count("<table") == html.count("</table>")
    assert "copy (&lt;script&gt;alert(&#x27;name&#x27;)&lt;/script&gt; Pérez)" in html


def test_the_csv_is_spreadsheet_safe(cohort):
    text = (cohort["notas"] / FOLDER / CSV_FILE).read_text(encoding="utf-8")
    cells = [cell for row in csv.reader(io.StringIO(text)) for cell in row]
    assert not [cell for cell in cells if formula_like(cell)]
    assert "'" + FORMULA_NAME + " Pérez" in cells
    (row,) = [row for row in cohort["rows"] if row["learner_b"] == "ind0"]
    assert row["name_b"] == "'" + FORMULA_NAME + " Pérez"  # shown as text, never evaluated
    assert row["lines_a"] and row["lines_b"]  # the matching lines, side by side
    assert all(re.match(r"(data|attention(_numpy)?)\.py:\d+: ", line) for line in row["lines_a"].splitlines())


def test_the_reports_are_readable_by_their_owner_only(cohort):
    folder = cohort["notas"] / FOLDER
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for name in (HTML_FILE, CSV_FILE):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600
    assert sorted(p.name for p in folder.iterdir()) == sorted([HTML_FILE, CSV_FILE])


def test_a_symlink_in_a_learners_folder_is_not_followed(tmp_path):
    course = load_course(ROOT / "course.yml")
    lesson = course.lesson(LESSON)
    secret = tmp_path / "secret.py"
    secret.write_text("TOKEN = 'do not read'\n", encoding="utf-8")
    target = tmp_path / "eve" / "exercises" / "03-atencion-causal"
    target.mkdir(parents=True)
    (target / "attention.py").symlink_to(secret)
    own = own_code.own_code("eve", tmp_path / "eve", lesson, own_code.stub_texts(course, lesson))
    assert ("attention.py", "link") in own.notes
    assert ("attention_numpy.py", "missing") in own.notes
    assert "do not read" not in own.text


def test_a_learner_folder_may_hold_the_lessons_files_themselves(tmp_path):
    course = load_course(ROOT / "course.yml")
    lesson = course.lesson(LESSON)
    folder = tmp_path / "ana"
    folder.mkdir()
    (folder / "attention_numpy.py").write_text("print(sorted(range(42)))\n", encoding="utf-8")
    own = own_code.own_code("ana", folder, lesson, own_code.stub_texts(course, lesson))
    assert [line.text for line in own.lines] == ["print(sorted(range(42)))"]
    assert own.notes == [("attention.py", "missing")]


def test_a_long_side_shows_its_matching_lines_with_a_few_around(tmp_path):
    from autograder.similarity import report

    own = own_code.OwnCode(
        "ana", LESSON, [own_code.Line("a.py", n, f"x{n} = {n}", None) for n in range(1, 1001)]
    )
    side = report.side_html(own, [500])
    assert side.count("<tr>") == 2 * report.CONTEXT + 1 + 2  # the match, its context, two gaps
    assert ">x501 = 501<" in side and ">x1 = 1<" not in side


# ------------------------------------------------------------------------------ bad input


def test_a_missing_notas_folder_is_a_usage_error(tmp_path, capsys):
    assert run_similarity(tmp_path / "nowhere", str(tmp_path)) == 2
    assert f"{tmp_path / 'nowhere'} is not a folder" in capsys.readouterr().err


def test_a_missing_submissions_folder_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "notas").mkdir()
    assert run_similarity(tmp_path / "notas", str(tmp_path / "entregas")) == 2
    assert f"{tmp_path / 'entregas'} is not a folder" in capsys.readouterr().err
    assert run_similarity(tmp_path / "notas") == 2
    assert "run.json does not record it" in capsys.readouterr().err
    assert not (tmp_path / "notas" / FOLDER).exists()


def test_an_empty_cohort_is_said_so(tmp_path, capsys):
    (tmp_path / "notas").mkdir(), (tmp_path / "entregas").mkdir()
    assert run_similarity(tmp_path / "notas", str(tmp_path / "entregas")) == 2
    assert "no learners to compare" in capsys.readouterr().err
    assert not (tmp_path / "notas" / FOLDER).exists()


def test_submissions_recorded_in_run_json_and_a_small_cohort(tmp_path, cohort, capsys):
    """Two learners make one pair: no distribution, nothing flagged by code, but listed; the
    submissions folder comes from run.json; a run.json id that is not a learner id is ignored."""
    notas = tmp_path / "notas"
    Store(notas).write_run(
        {"lessons": [LESSON], "learners": ["copy", "ind0", "../etc"], "submissions": str(cohort["subs"])}
    )
    assert run_similarity(notas) == 0
    html = (notas / FOLDER / HTML_FILE).read_text(encoding="utf-8")
    assert "Only 1 pair (at least 6)" in html
    rows = list(csv.DictReader(io.StringIO((notas / FOLDER / CSV_FILE).read_text(encoding="utf-8"))))
    assert rows == []
    assert "0 pairs flagged for their code in 0 lessons;" in capsys.readouterr().err


# ------------------------------------------------------------------------------ the rule


def _cohort(scores: dict[tuple[int, int], float], default: float, learners: int = 6) -> list[compare.Pair]:
    """Every pair of `learners` learners, scoring `default` unless `scores` says otherwise."""
    return [
        compare.Pair("03", f"l{a}", f"l{b}", scores.get((a, b), default), 0.0, 0.0)
        for a, b in combinations(range(learners), 2)
    ]


def _flagged_pairs(pairs: list[compare.Pair]) -> set[tuple[str, str]]:
    compare.flag(pairs, compare.distribution(pairs))
    return {(pair.a, pair.b) for pair in pairs if pair.flagged_code}


def test_the_rule_is_relative_to_the_cohort():
    # The same score of 0.6 stands out in a cohort whose pairs share little, not in one whose
    # pairs share as much, nor between two learners who are that alike to everyone.
    spread = {(a, b): 0.1 + 0.01 * ((a * 7 + b * 3) % 5) for a, b in combinations(range(6), 2)}
    assert _flagged_pairs(_cohort({**spread, (0, 1): 0.6}, 0.1)) == {("l0", "l1")}
    assert _flagged_pairs(_cohort({**{k: v + 0.45 for k, v in spread.items()}, (0, 1): 0.6}, 0.5)) == set()
    common = {(a, b): 0.6 for a, b in combinations(range(6), 2) if a in (0, 1) or b in (0, 1)}
    assert _flagged_pairs(_cohort({**spread, **common}, 0.1)) == set()


def test_the_rule_without_spread_and_with_too_few_pairs():
    tied = _cohort({(0, 1): 0.9}, 0.2)  # residual MAD 0: the mean absolute deviation scales z
    dist = compare.distribution(tied)
    assert dist.scale == pytest.approx(1.2533 * 0.7 / 15)
    compare.flag(tied, dist)
    assert {(p.a, p.b) for p in tied if p.flagged_code} == {("l0", "l1")}
    same = _cohort({}, 0.4)  # no spread at all: none stands out
    compare.flag(same, compare.distribution(same))
    assert not any(p.flagged_code for p in same) and all(p.z == 0.0 for p in same)
    few = _cohort({(0, 1): 1.0}, 0.1, learners=3)  # 3 pairs < MIN_PAIRS
    compare.flag(few, compare.distribution(few))
    assert not any(p.flagged_code for p in few)
    assert compare.distribution([]).median is None


def test_own_lines_are_the_learners_own_with_their_todo():
    stub = "def f(x):\n    # TODO [double]: duplica x\n    raise NotImplementedError('TODO [double]')\n"
    mine = "def f(x):\n    # TODO [double]: duplica x\n\n    y = x * 2\n    return y\n"
    lines = own_code.own_lines(stub, mine, "m.py")
    assert [(line.number, line.text.strip(), line.todo) for line in lines] == [
        (4, "y = x * 2", "double"),
        (5, "return y", "double"),
    ]
    assert own_code.own_lines(stub, stub, "m.py") == []
