"""The command line speaks the course language: every --help, argparse's own
words and the usage errors come from the catalogs (messages/<lang>/cli.yml), with the English
catalog chosen by --lang (before or after the command), $AUTOGRADER_LANG or course.yml. A typo
gets a suggestion, an unknown lesson lists the lessons, a wrong --submission folder is said
once. Real `python -m autograder` processes where that is cheap (no grading run here)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest
import yaml
from support.learner_course import cli_env, make_course
from support.project import ROOT

from autograder import cli, cli_language
from autograder.core import i18n
from autograder.core.results import Feedback, Text
from autograder.engine import practice
from autograder.engine.feedback import format_traceback

COURSE_YML = ROOT / "course.yml"
# Words that would give away an English text in a Spanish help page.
ENGLISH = ("usage:", "options:", "positional arguments", "show this help", " the ", "default:")


def run(*args, env: dict[str, str] | None = None, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "autograder", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=env or cli_env(),
    )


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(path, parser) of every sub-command, nested ones (ci record) included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from commands(sub, (*path, name))


def texts(parser: argparse.ArgumentParser) -> list[str]:
    """Every text a reader sees in a parser's help: description and each argument's help."""
    found = [parser.description]
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        found.append(action.help)
        if isinstance(action, argparse._SubParsersAction):
            found += [choice.help for choice in action._choices_actions]
    return found


# --- help ------------------------------------------------------------------------------------------


def test_every_command_has_a_description_and_help_in_each_language():
    parsers = {lang: dict(commands(cli.build_parser(lang))) for lang in i18n.LANGUAGES}
    assert set(parsers["es"]) >= {("check",), ("watch",), ("hint",), ("progress",), ("ci", "record")}
    for path, spanish in parsers["es"].items():
        english = parsers["en"][path]
        es, en = texts(spanish), texts(english)
        assert all(isinstance(text, str) and text.strip() for text in es + en), (path, es, en)
        assert es != en, path  # each text comes from its language's catalog
        for text in es:
            assert not any(word in text for word in ENGLISH), (path, text)


def test_help_speaks_spanish_by_default_and_english_when_asked(tmp_path):
    spanish = run("check", "--help")
    assert spanish.returncode == 0, spanish.stderr
    assert spanish.stdout.startswith("uso: autograder check")
    assert "opciones:" in spanish.stdout and "muestra esta ayuda y termina" in spanish.stdout
    assert "el siguiente paso" in spanish.stdout  # its description
    assert not any(word in spanish.stdout for word in ("usage:", "options:", "show this help"))

    english_course = tmp_path / "course.yml"
    data = yaml.safe_load(COURSE_YML.read_text(encoding="utf-8"))
    english_course.write_text(
        COURSE_YML.read_text(encoding="utf-8").replace(f"language: {data['language']}", "language: en", 1),
        encoding="utf-8",
    )
    for args, env in (
        (("--lang", "en", "check", "--help"), None),  # before the command
        (("check", "--help", "--lang", "en"), None),  # the command's own option
        (("check", "--help"), cli_env(AUTOGRADER_LANG="en")),
        (("--course", english_course, "check", "--help"), None),
    ):
        english = run(*args, env=env)
        assert english.returncode == 0, (args, english.stderr)
        assert english.stdout.startswith("usage: autograder check"), args
        assert "the one next step" in english.stdout and "opciones" not in english.stdout, args


def test_the_top_level_help_lists_every_command_in_spanish():
    proc = run("--help")
    assert proc.returncode == 0
    assert "órdenes:" in proc.stdout and "AUTOGRADER_LANG" in proc.stdout
    for line in ("check ", "watch ", "hint ", "progress "):
        assert any(row.strip().startswith(line) for row in proc.stdout.splitlines()), line
    assert "tu XP, tu racha" in proc.stdout


def test_help_stays_fast_it_imports_no_torch():
    code = (
        "import sys, contextlib, io\n"
        "from autograder import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        cli.main(['grade', '--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('torch' in sys.modules)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, env=cli_env()
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_an_invalid_AUTOGRADER_LANG_is_named_and_ignored():
    proc = run("progress", "--help", env=cli_env(AUTOGRADER_LANG="fr"))
    assert proc.returncode == 0
    assert "Aviso: AUTOGRADER_LANG=fr no es un idioma del curso (es, en); se usa es." in proc.stderr
    assert proc.stdout.startswith("uso:")


# --- usage errors ----------------------------------------------------------------------------------


def test_a_mistyped_command_gets_a_suggestion_in_the_course_language():
    proc = run("chek", "03")
    assert proc.returncode == 2
    assert "autograder: error: `chek` no es una orden de autograder. ¿Quisiste decir `check`?" in proc.stderr
    assert "invalid choice" not in proc.stderr and proc.stderr.startswith("uso: autograder")
    english = run("--lang", "en", "progres")
    assert english.returncode == 2 and "Did you mean `progress`?" in english.stderr
    nothing_close = run("zzzz")
    assert nothing_close.returncode == 2
    assert (
        "Las órdenes: grade, stubs, release" in nothing_close.stderr
        and "Quisiste" not in nothing_close.stderr
    )


def test_argparse_own_errors_are_in_spanish():
    missing = run("hint")
    assert missing.returncode == 2 and "faltan estos argumentos: LECCIÓN" in missing.stderr
    bad_type = run("check", "03", "--seed", "x")
    assert (
        bad_type.returncode == 2
        and "argumento --seed: valor no válido (se espera int): 'x'" in bad_type.stderr
    )
    extra = run("progress", "--fetch", "now")
    assert extra.returncode == 2 and "no entiendo estos argumentos: now" in extra.stderr
    close = run("grade", "03", "--format", "jsn")
    assert close.returncode == 2 and "¿Quisiste decir `json`?" in close.stderr
    port = run("viewer", "--port", "x")
    assert port.returncode == 2 and "argumento --port: 'x' no es un número de puerto (0-65535)" in port.stderr
    english_port = run("--lang", "en", "viewer", "--port", "70000")
    assert english_port.returncode == 2 and "'70000' is not a port number (0-65535)" in english_port.stderr


@pytest.mark.parametrize("args", [("check", "7"), ("hint", "7"), ("watch", "7"), ("grade", "7")])
def test_an_unknown_lesson_is_said_in_spanish_with_the_valid_ids(args):
    proc = run(*args)
    assert proc.returncode == 2
    assert f"autograder {args[0]}: error: no hay ninguna lección `7` en el curso." in proc.stderr
    assert "01 tokens-y-lotes, 02 bigrama, 03 atencion-causal" in proc.stderr
    assert "unknown lesson" not in proc.stderr and proc.stdout == ""


def test_a_misspelt_lesson_name_gets_a_suggestion():
    proc = run("hint", "atencion")
    assert proc.returncode == 2 and "¿Quisiste decir `atencion-causal`?" in proc.stderr
    english = run("hint", "atencion", "--lang", "en")
    assert english.returncode == 2 and "the course has no lesson `atencion`. Did you mean" in english.stderr


def test_a_wrong_submission_folder_is_reported_once_without_grading(tmp_path):
    empty = tmp_path / "entrega"
    empty.mkdir()
    proc = run("grade", "--submission", empty, "03")
    assert proc.returncode == 2 and proc.stdout == ""  # nothing graded: no 22 "No encuentro..." lines
    assert proc.stderr.count("\n") == 1 and "No encuentro el archivo" not in proc.stderr
    assert (
        f"--submission {empty}: no encuentro ahí ningún archivo de la lección 03 "
        "(attention_numpy.py, attention.py, quiz.yml)"
    ) in proc.stderr

    # The folder one level up, or the course's root: it says where the files are.
    lesson = tmp_path / "mi-curso" / "exercises" / "03-atencion-causal"
    lesson.mkdir(parents=True)
    (lesson / "attention.py").write_text("", encoding="utf-8")
    root = tmp_path / "mi-curso"
    one = run("grade", "--submission", root, "03")
    assert one.returncode == 2 and f"prueba con --submission {lesson}" in one.stderr
    every = run("grade", "--submission", root)
    assert every.returncode == 2 and "ninguna carpeta de lección" in every.stderr
    assert f"prueba con --submission {root / 'exercises'}" in every.stderr


# --- texts of the results --------------------------------------------------------------------------


def test_a_trimmed_traceback_says_no_spanish_word_in_english():
    frames = [
        {"filename": "attention.py", "lineno": 85, "name": "forward", "line": "att = q @ k"},
        {"filename": "attention.py", "lineno": 12, "name": "<module>", "line": ""},
    ]
    block = format_traceback(frames, "RuntimeError", "boom", final_line=False)
    feedback = Feedback((Text("engine.student_raised", {"type": "RuntimeError", "message": "boom"}), block))
    english = i18n.feedback_text(feedback, "en")
    assert "attention.py:85 · forward()" in english and english.endswith("  attention.py:12")
    assert " en forward" not in english and " en " not in block.text
    assert i18n.feedback_text(feedback, "es").endswith(block.text.rstrip("\n"))


def test_a_skipped_practice_test_says_its_reason_once():
    outcome = {
        "name": "test_generate",
        "todo": None,
        "outcome": "skipped",
        "duration": 0.1,
        "message": "Skipped: necesita tu GPT de las lecciones 03 y 04: No module named 'model'",
    }
    check = practice.check_result(outcome, {})
    spanish, english = (i18n.feedback_text(check.feedback, lang) for lang in ("es", "en"))
    for text in (spanish, english):
        assert "Skipped:" not in text and "Omitida" not in text
        assert text.count("necesita tu GPT de las lecciones 03 y 04") == 1
    assert english.startswith("This practice test could not run")


def test_counts_agree_with_their_noun():
    one = i18n.translate("batch.start", "es", learners=1, todo=1, same=0, jobs=1, seed=7)
    assert one.startswith("1 alumno: ") and "· 1 proceso ·" in one and "procesos" not in one
    many = i18n.translate("batch.start", "es", learners=3, todo=3, same=0, jobs=4, seed=7)
    assert many.startswith("3 alumnos: ") and "· 4 procesos ·" in many
    assert "· 1 process ·" in i18n.translate("batch.start", "en", learners=1, todo=1, same=0, jobs=1, seed=7)
    assert i18n.translate("batch.fetching", "es", n=1) == "Obteniendo 1 repositorio con git…"
    assert "(1 archivo cambiado)" in i18n.translate("cli.stubs_regenerated", "es", changed=1)


def test_cli_catalogs_match_between_languages():
    # Their {placeholders}: tests/render/test_render.py checks every catalog's.
    es, en = i18n.catalog("es"), i18n.catalog("en")
    keys = [key for key in es if key.startswith("cli.")]
    assert len(keys) > 100 and {key for key in en if key.startswith("cli.")} == set(keys)
    # argparse's words keep its %-placeholders, which argparse fills in.
    for english, key in cli_language.ARGPARSE_WORDS.items():
        assert en[key] == english, key
        for placeholder in ("%s", "%r", "%(prog)s", "%(message)s", "%(value)r", "%(type)s"):
            assert (placeholder in english) == (placeholder in es[key]), (key, placeholder)


# --- progress --fetch ------------------------------------------------------------------------------


def git(cwd, *args) -> None:
    env = cli_env(
        GIT_AUTHOR_NAME="Ana",
        GIT_AUTHOR_EMAIL="ana@example.org",
        GIT_COMMITTER_NAME="Ana",
        GIT_COMMITTER_EMAIL="ana@example.org",
    )
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env)


def test_progress_fetch_without_a_grades_branch_does_not_suggest_fetch_again(tmp_path):
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "--quiet", "--bare", "-b", "main", str(remote))
    root = make_course(tmp_path / "learner", {"01": "stub"})
    git(root, "init", "--quiet", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "--quiet", "-m", "start")
    git(root, "remote", "add", "origin", str(remote))
    git(root, "push", "--quiet", "origin", "main")

    before = run("--course", root / "course.yml", "progress", cwd=root)
    assert before.returncode == 0, before.stderr
    assert "tráela con --fetch" in before.stdout.splitlines()[-1]

    fetched = run("--course", root / "course.yml", "progress", "--fetch", cwd=root)
    assert fetched.returncode == 0 and fetched.stderr == "", fetched.stderr
    last = fetched.stdout.splitlines()[-1]
    assert "--fetch" not in last
    assert "tu repositorio en origin aún no tiene rama grades" in last and "primer push" in last

    # A fetch that fails: origin is gone. (An inherited GIT_DIR no longer does it: the git
    # runner drops GIT_DIR so that -C always names the learner's repository.)
    git(root, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    failed = run("--course", root / "course.yml", "progress", "--fetch", cwd=root)
    assert failed.returncode == 0
    assert "--fetch" not in failed.stdout.splitlines()[-1]
    assert "no se pudo traer de origin (mira el aviso de arriba)" in failed.stdout


def test_a_stdout_that_cannot_encode_the_output_gets_question_marks_not_a_crash(tmp_path):
    """Windows' ANSI code page on a pipe (an IDE's console) cannot encode █ or ñ in every case:
    the command still ends normally, with ? where a character could not be written."""
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    env.pop("PYTHONUTF8", None)
    proc = subprocess.run(
        [sys.executable, "-X", "utf8=0", "-m", "autograder", "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr.decode("ascii", "replace")[-2000:]
    assert b"?" in proc.stdout and b"Traceback" not in proc.stderr
