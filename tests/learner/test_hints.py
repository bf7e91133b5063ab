"""Hints: every lesson's pistas.yml is complete (three levels per TODO, es and en), never gives a
line of the solution away, and `autograder hint` shows the levels one call at a time."""

from __future__ import annotations

import io
import re
import textwrap
import tokenize

import pytest
import yaml
from support.learner_course import history_lines, make_course, run_cli
from support.project import ROOT

from autograder.core import i18n
from autograder.core.manifest import load_course
from autograder.course.stubs import parse_regions
from autograder.learner.folders import HINTS_FILE
from autograder.learner.hints import HintError, file_problems, load_lesson_hints, read_hints

COURSE = load_course(ROOT / "course.yml")
# A lesson needs hints once its solution files exist (lessons still being written may lack them).
WRITTEN = [
    lesson
    for lesson in COURSE.lessons
    if all((ROOT / "solutions" / lesson.folder / name).is_file() for name in lesson.files)
]
# Shorter solution lines ("T = int(T)", "ids = []", "loss = None") say nothing about the answer.
MIN_LINE = 10
# The right-hand side of an assignment or return, when this long, is the answer by itself.
MIN_EXPRESSION = 16


def _normalise(text: str) -> str:
    return re.sub(r"\s+", "", text).lower()


def _logical_lines(body: list[str]) -> list[str]:
    """The solution's statements, one per logical line (a call over several lines is one),
    without comments; falls back to physical lines where the region does not tokenize alone."""
    source = textwrap.dedent("\n".join(body)) + "\n"
    lines, current = [], []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                if current:
                    lines.append("".join(current))
                current = []
            elif token.type not in (tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT):
                current.append(token.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return [line.split("#", 1)[0] for line in body]
    return lines


def _expression(line: str) -> str | None:
    """What a normalised statement computes: after `return`, or after its top-level `=`."""
    if line.startswith("return"):
        return line[len("return") :]
    depth = 0
    for index, char in enumerate(line):
        depth += char in "([{"
        depth -= char in ")]}"
        if (
            char == "="
            and depth == 0
            and line[index + 1 : index + 2] != "="
            and line[index - 1 : index] not in "=!<>"
        ):
            return line[index + 1 :]
    return None


def secret_fragments(lesson) -> dict[str, str]:
    """Normalised solution statements (and their expressions) of a lesson -> their origin."""
    fragments = {}
    folder = ROOT / "solutions" / lesson.folder
    for name in lesson.files:
        for region in parse_regions((folder / name).read_text(encoding="utf-8"), name):
            for statement in _logical_lines(region.body):
                line = _normalise(statement)
                if len(line) >= MIN_LINE:
                    fragments[line] = f"{name}, region {region.id}: {statement}"
                expression = _expression(line)
                if expression and len(expression) >= MIN_EXPRESSION:
                    fragments[expression] = f"{name}, region {region.id} (expression): {statement}"
    return fragments


def leaks(hints: dict, fragments: dict[str, str]) -> list[str]:
    found = []
    for todo, by_lang in hints.items():
        for lang, levels in by_lang.items():
            for level, text in enumerate(levels, start=1):
                flat = _normalise(text)
                found += [
                    f"{todo}.{lang}[{level}] gives away {origin}"
                    for fragment, origin in fragments.items()
                    if fragment in flat
                ]
    return found


def test_some_lessons_are_written():
    assert {"01", "02", "03"} <= {lesson.id for lesson in WRITTEN}


@pytest.mark.parametrize("lesson", WRITTEN, ids=lambda lesson: lesson.id)
def test_every_todo_has_three_levels_in_both_languages(lesson):
    path = ROOT / "exercises" / lesson.folder / HINTS_FILE
    assert path.is_file(), f"{path.relative_to(ROOT)} is missing: write the lesson's hints"
    assert file_problems(read_hints(path), lesson) == []
    hints = load_lesson_hints(path, lesson)
    assert list(hints) == [todo.id for todo in lesson.todos], "hints follow the TODO order of course.yml"
    for todo, by_lang in hints.items():
        assert set(by_lang) == set(i18n.LANGUAGES)
        for levels in by_lang.values():
            assert len(levels) == 3 and len(set(levels)) == 3, f"{todo}: three different levels"
    # The learner's copy is the one `autograder stubs` writes: identical.
    copy = ROOT / "exercises" / lesson.folder / HINTS_FILE
    assert copy.read_bytes() == path.read_bytes()


@pytest.mark.parametrize("lesson", WRITTEN, ids=lambda lesson: lesson.id)
def test_no_hint_contains_a_line_of_the_solution(lesson):
    fragments = secret_fragments(lesson)
    assert len(fragments) >= len(lesson.todos), "every TODO has some non-trivial solution line"
    hints = load_lesson_hints(ROOT / "exercises" / lesson.folder / HINTS_FILE, lesson)
    assert leaks(hints, fragments) == []


def test_the_leak_check_catches_a_solution_line_however_it_is_spaced():
    lesson = COURSE.lesson("03")
    fragments = secret_fragments(lesson)
    hints = load_lesson_hints(ROOT / "exercises" / lesson.folder / HINTS_FILE, lesson)
    hints["contiguous-view"]["en"][2] = "Write  y = y.transpose( 1, 2 ).contiguous().view(B, T, C)  and done."
    hints["fused"]["es"][1] = (
        "Escribe return F.scaled_dot_product_attention(\n q, k, v, attn_mask=None,\n"
        " dropout_p=self.dropout if self.training else 0.0, is_causal=True,\n)"
    )
    hints["head-reshape"]["es"][0] = "Empieza con qkv.split(C, dim=2) y sigue."  # the expression alone
    found = leaks(hints, fragments)
    assert [item.split(" gives away")[0] for item in found] == [
        "head-reshape.es[1]",
        "contiguous-view.en[3]",
        "contiguous-view.en[3]",
        "fused.es[2]",
        "fused.es[2]",
    ]


# --- validation -----------------------------------------------------------------------------------


def _write(tmp_path, data) -> object:
    path = tmp_path / HINTS_FILE
    path.write_text(
        data if isinstance(data, str) else yaml.safe_dump(data, allow_unicode=True), encoding="utf-8"
    )
    return path


def _complete(lesson) -> dict:
    return {
        todo.id: {lang: [f"{lang} {todo.id} {n}" for n in (1, 2, 3)] for lang in i18n.LANGUAGES}
        for todo in lesson.todos
    }


def test_validation_names_every_problem(tmp_path):
    lesson = COURSE.lesson("01")
    data = _complete(lesson)
    data["vocab"]["es"] = data["vocab"]["es"][:2]
    del data["split"]["en"]
    data["targets-shift"]["en"][1] = "  "
    data["targets-shift"]["fr"] = ["a", "b", "c"]
    del data["batch-offsets"]
    data["tokenizer"] = {"es": ["a", "b", "c"], "en": ["a", "b", "c"]}
    problems = file_problems(read_hints(_write(tmp_path, data)), lesson)
    assert problems == [
        "vocab.es: expected 3 hints, found 2",
        "split.en: missing",
        "batch-offsets: no hints for this TODO",
        "targets-shift.fr: unknown language (expected es, en)",
        "targets-shift.en[1]: expected a non-empty text",
        "tokenizer: not a TODO of lesson 01 (its TODOs: vocab, encode-decode, split, batch-offsets, targets-shift)",
    ]
    with pytest.raises(
        HintError, match=r"pistas\.yml: vocab\.es: expected 3 hints, found 2; split\.en: missing"
    ):
        load_lesson_hints(tmp_path / HINTS_FILE, lesson)


def test_unreadable_files_say_where(tmp_path):
    with pytest.raises(HintError, match=r"pistas\.yml: invalid YAML at line 3"):
        read_hints(_write(tmp_path, "vocab:\n  es: [a, b\n  en: c\n"))
    with pytest.raises(HintError, match="not found"):
        read_hints(tmp_path / "missing.yml")
    assert file_problems(["a list"], COURSE.lesson("01")) == [
        "the file must be a mapping of TODO ids to hints"
    ]


# --- the command ----------------------------------------------------------------------------------


def _level_text(lesson_id: str, todo: str, lang: str, level: int) -> str:
    lesson = COURSE.lesson(lesson_id)
    return load_lesson_hints(ROOT / "exercises" / lesson.folder / HINTS_FILE, lesson)[todo][lang][level - 1]


def _shown_hint(stdout: str) -> str:
    """The hint's text as printed (wrapped and indented): one line again."""
    body = stdout.split(":\n", 1)[1].split("\n\n", 1)[0]
    return " ".join(line.strip() for line in body.splitlines())


def test_hint_levels_one_call_at_a_time(tmp_path):
    root = make_course(tmp_path / "course", {"03": "stub"})
    attention = root / "exercises" / "03-atencion-causal" / "attention.py"
    line = next(
        n
        for n, row in enumerate(attention.read_text(encoding="utf-8").splitlines(), start=1)
        if "# TODO [scaling]" in row
    )
    shown = []
    for _ in range(4):
        proc = run_cli(root, "hint", "03", "scaling")
        assert proc.returncode == 0, proc.stderr
        shown.append(proc.stdout)
    first = shown[0].splitlines()
    assert first[:4] == [
        "TODO [scaling] · escala las puntuaciones por 1/sqrt(hs)",
        f"En exercises/03-atencion-causal/attention.py:{line}",
        "",
        "Pista 1 de 3:",
    ]
    assert first[-1] == "Otra pista, más concreta: autograder hint 03 scaling"
    for level, out in zip((1, 2, 3, 3), shown):
        assert f"Pista {level} de 3:" in out
        assert _shown_hint(out) == _level_text("03", "scaling", "es", level)
    assert "Es la última pista" in shown[2] and "Es la última pista" in shown[3]

    # --level shows that level without forgetting how far the learner got; --lang en in English.
    again = run_cli(root, "hint", "03", "scaling", "--level", "1", "--lang", "en")
    assert again.returncode == 0, again.stderr
    assert "Hint 1 of 3:" in again.stdout and _shown_hint(again.stdout) == _level_text(
        "03", "scaling", "en", 1
    )
    other = run_cli(root, "hint", "03", "fused")
    assert "Pista 1 de 3:" in other.stdout, "levels are counted per TODO"
    assert "Pista 3 de 3:" in run_cli(root, "hint", "03", "scaling").stdout
    assert history_lines(root) == [], "a hint for a named TODO grades nothing"


def test_hint_without_todo_grades_to_find_the_next_step(tmp_path):
    root = make_course(tmp_path / "course", {"02": "stub"})
    proc = run_cli(root, "hint", "02")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "Tu siguiente paso en la lección 02 es TODO [embedding-lookup]."
    assert lines[1].startswith("TODO [embedding-lookup] · ")
    assert _shown_hint(proc.stdout) == _level_text("02", "embedding-lookup", "es", 1)
    assert len(history_lines(root)) == 1, "the grading it took is recorded like any other"
    # Files unchanged: the step is remembered, no second grading.
    second = run_cli(root, "hint", "02")
    assert "Pista 2 de 3:" in second.stdout and len(history_lines(root)) == 1


def test_hint_bad_input(tmp_path):
    root = make_course(tmp_path / "course", {"01": "stub"})
    unknown = run_cli(root, "hint", "01", "mask")
    assert unknown.returncode == 2
    assert (
        "La lección 01 no tiene el TODO [mask]. Sus TODO son: vocab, encode-decode, split, "
        "batch-offsets, targets-shift."
    ) in unknown.stderr
    level = run_cli(root, "hint", "01", "vocab", "--level", "4")
    assert level.returncode == 2 and "--level debe ser 1, 2 o 3, no 4." in level.stderr
    folder = run_cli(root, "hint", "02", "sampling")
    assert (
        folder.returncode == 2
        and "La carpeta exercises/02-bigrama de la lección 02 no existe" in folder.stderr
    )

    hints = root / "exercises" / "01-tokens-y-lotes" / HINTS_FILE
    data = yaml.safe_load(hints.read_text(encoding="utf-8"))
    data["split"]["es"] = ["solo una"]
    hints.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    # Another TODO's broken entry never costs the learner a good hint...
    assert run_cli(root, "hint", "01", "vocab").returncode == 0
    # ...and a broken one says what is wrong.
    broken = run_cli(root, "hint", "01", "split")
    assert broken.returncode == 2
    assert (
        "exercises/01-tokens-y-lotes/pistas.yml no es un archivo de pistas válido: "
        "split.es: expected 3 hints, found 1"
    ) in broken.stderr
    hints.unlink()
    missing = run_cli(root, "hint", "01", "vocab")
    assert missing.returncode == 2
    assert "No hay pistas para la lección 01: falta exercises/01-tokens-y-lotes/pistas.yml." in missing.stderr
