"""Learner text arrives inert in every rendering (autograder/core/neutral.py): escape sequences never
reach a terminal, and Markdown or HTML a learner wrote (an exception's message, a traceback's
line, a title in a results.json, an error's detail) is text in the job summary, the comment and
the cohort report, never a heading, a link, emphasis, an image or a table.

Markdown is judged by a real CommonMark renderer (markdown-it-py, with GFM's tables and
strikethrough), on what the real renderers and the real `autograder grade` print."""

from __future__ import annotations

import html
import re
import subprocess
import sys

import pytest
from markdown_it import MarkdownIt
from support.grading import write_submission
from support.hostile_snippets import ESCAPES, HOSTILE, MARKDOWN, hostile_attention
from support.project import ROOT, SEED

from autograder.core import neutral
from autograder.core.results import Block, CheckResult, CourseResult, Feedback, LessonResult, Status, message
from autograder.engine.checks import describe_student_error
from autograder.render.output import render_markdown, render_text
from autograder.sandbox.client import StudentError

LIVE_TAGS = (
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "a",
    "strong",
    "em",
    "img",
    "code",
    "del",
    "table",
    "li",
    "blockquote",
    "hr",
    "pre",
)


def to_html(markdown: str) -> str:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(markdown)


def tags(rendered: str) -> dict[str, int]:
    found = re.findall(r"<([a-z0-9]+)[\s>/]", rendered)
    return {tag: found.count(tag) for tag in LIVE_TAGS if tag in found}


def plain(rendered: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", rendered))


def no_controls(text: str) -> bool:
    return not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]", text)


# --- the neutralisers -----------------------------------------------------------------------


def test_terminal_shows_control_characters_and_keeps_layout():
    out = neutral.terminal("a\tb\r\nc" + ESCAPES)
    assert no_controls(out) and "a\tb\nc" in out
    assert "␛]52;c;SGVsbG8=␇" in out and "␛[2J" in out and "␍encima" in out
    assert neutral.terminal("x = 1\n") == "x = 1\n"  # ordinary text untouched


@pytest.mark.parametrize("where", ["paragraph", "cell", "heading", "list"])
def test_markdown_inline_is_inert_wherever_it_goes(where):
    text = neutral.markdown_inline(HOSTILE)
    assert "\n" not in text and no_controls(text)
    document = {
        "paragraph": text,
        "cell": f"| h |\n|---|\n| {text} |",
        "heading": f"## {text}",
        "list": f"- x: {text}",
    }[where]
    rendered = to_html(document)
    expected = {"paragraph": {}, "cell": {"table": 1}, "heading": {"h2": 1}, "list": {"li": 1}}[where]
    assert tags(rendered) == expected, rendered
    shown = plain(rendered)
    for piece in ("## ✔ XP 300/300", "[click](http://x)", "**bold**", "<img src=x>", "`code`", "| a | b |"):
        assert piece in shown, (piece, shown)
    assert "@profe" not in text and "@\u2060profe" in shown  # shown, but no GitHub mention


def test_markdown_text_keeps_lines_and_opens_no_block():
    rendered = to_html(neutral.markdown_text(HOSTILE))
    assert tags(rendered) == {}, rendered
    assert rendered.count("<br />") == HOSTILE.count("\n")
    shown = plain(rendered)
    assert "## ✔ XP 300/300" in shown and "- item" in shown and "[ref]: http://z" in shown and "===" in shown


def test_code_spans_and_fences_cannot_be_closed():
    body = "```\n## x\n````"
    rendered = to_html(neutral.markdown_fence(body) + "\n\n## after")
    assert tags(rendered) == {"pre": 1, "code": 1, "h2": 1} and "## x" in plain(rendered)
    span = to_html("a " + neutral.markdown_code("x``y`") + " b")
    assert tags(span) == {"code": 1} and "x``y`" in plain(span)
    cell = to_html("| h |\n|---|\n| " + neutral.markdown_cell_code("a|b`") + " |")
    assert tags(cell) == {"table": 1, "code": 1} and "a|b`" in plain(cell)


# --- the renderers --------------------------------------------------------------------------


def hostile_result() -> CourseResult:
    error = StudentError(
        "RuntimeError",
        HOSTILE,
        [
            {
                "filename": "/sb/attention.py",
                "lineno": 57,
                "name": "forward",
                "line": "raise RuntimeError(" + ESCAPES + ")",
            },
        ],
        "/sb",
    )
    checks = [
        CheckResult(
            "future-leak",
            "mask",
            Status.FAILED,
            0.0,
            6.0,
            describe_student_error(error, "mask", {"mask": {"es": "la máscara", "en": "the mask"}}),
        ),
        CheckResult(
            "repr",
            "mask",
            Status.FAILED,
            0.0,
            6.0,
            Feedback.of(message("feedback.not_a_tensor", what="la salida", got=HOSTILE)),
        ),
        CheckResult("gpu-parity", None, Status.SKIPPED, 0.0, 0.0, Feedback((Block(HOSTILE),))),
    ]
    lesson = LessonResult("03", "atencion-causal", {"es": HOSTILE, "en": HOSTILE}, 50, checks)
    return CourseResult(HOSTILE, "es", SEED, [lesson])


@pytest.mark.parametrize("lang", ["es", "en"])
def test_the_job_summary_and_the_comment_keep_learner_markdown_inert(lang):
    result = hostile_result()
    full = to_html(render_markdown(result, lang))
    # Ours: the title, the lesson's heading, one heading per failed check, the table, the XP.
    found = tags(full)
    assert (found.get("h1"), found.get("h2"), found.get("h3"), found.get("table")) == (1, 1, 2, 1), found
    assert "a" not in found and "img" not in found and "em" not in found and "del" not in found
    assert found.get("strong") == 2  # the XP and the skipped checks' label, nothing of the learner's
    assert found.get("li") == 1  # the one skipped check
    shown = plain(full)
    assert shown.count("## ✔ XP 300/300") >= 4 and "[click](http://x)" in shown and "<img src=x>" in shown
    compact = render_markdown(result, lang, compact=True, run_url="https://github.example/o/r/actions/runs/1")
    links = re.findall(r'<a href="([^"]*)"', to_html(compact))
    assert links and set(links) == {"https://github.example/o/r/actions/runs/1"}
    for markdown in (render_markdown(result, lang), compact):
        assert no_controls(markdown) and "␛]52;c;SGVsbG8=␇" in markdown


def test_terminal_text_carries_no_escape_sequence():
    result = hostile_result()
    plain_text = render_text(result, "es", color=False, verbose=True)
    assert no_controls(plain_text.replace("\t", "")) and "␛]52;c;SGVsbG8=␇" in plain_text
    coloured = render_text(result, "es", color=True, verbose=True)
    # Colour is rich's own SGR codes; no other escape sequence, no bell, no carriage return.
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured).count("\x1b") == 0
    assert "\x07" not in coloured and "\r" not in coloured and "\x9b" not in coloured


# --- real grading, real command line --------------------------------------------------------


def test_autograder_grade_prints_a_learners_exception_inert(lesson03, tmp_path):
    """`autograder grade 03` on code whose exception message is escape sequences and Markdown:
    the terminal text has no control character, the Markdown no live construct of the learner."""
    folder = write_submission(tmp_path / "exercises" / lesson03.folder, hostile_attention(lesson03))
    run = [
        sys.executable,
        "-m",
        "autograder",
        "grade",
        "03",
        "--submission",
        str(folder.parent),
        "--seed",
        str(SEED),
    ]
    text = subprocess.run(
        [*run, "--format", "text", "--verbose"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert text.returncode == 0, text.stderr[-2000:]
    assert "␛]52;c;SGVsbG8=␇" in text.stdout  # the attack did run, and is shown, visible
    assert no_controls(text.stdout.replace("\t", "")) and no_controls(text.stderr.replace("\t", ""))
    markdown = subprocess.run(
        [*run, "--format", "markdown"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert markdown.returncode == 0, markdown.stderr[-2000:]
    rendered = to_html(markdown.stdout)
    assert "## ✔ XP 300/300" in plain(rendered) and no_controls(markdown.stdout)
    assert tags(rendered).get("h2") == 1 and "a" not in tags(rendered) and "img" not in tags(rendered)
    assert not any("XP 300/300" in h for h in re.findall(r"<h[1-6]>(.*?)</h[1-6]>", rendered))


# --- the cohort report and grade-all's lines ------------------------------------------------


def test_a_learners_error_detail_is_inert_in_the_cohort_report_and_progress_lines(course, tmp_path):
    from autograder.cohort.report import load
    from autograder.cohort.report import render_markdown as cohort_markdown
    from autograder.cohort.store import Record, Store
    from autograder.core import i18n
    from autograder.render.output import render_json

    store = Store(tmp_path)
    empty = render_json(CourseResult(course.name, "es", SEED, []), "es")
    line = ESCAPES.replace("\r", "") + " " + MARKDOWN.replace("\n", " ")  # the line of a detail that is shown
    details = {
        "crashed": line + "\n" + HOSTILE,
        "internal": "Traceback\n" + HOSTILE + "\n" + line,
        "fetch": line + "\n" + HOSTILE,
    }
    for learner, (error, detail) in zip(("ana", "beto", "carla"), details.items()):
        store.save(Record(learner, "k", "error", error=error, detail=detail), empty)
        reason = i18n.localize(store.read_record(learner).error_reason(), "es")
        assert no_controls(reason) and "␛" in reason  # what grade-all prints for that learner
    run = {"learners": ["ana", "beto", "carla"], "lessons": ["03"], "seed": SEED}
    report = cohort_markdown(load(course, run, store), "es")
    rendered = to_html(report)
    assert no_controls(report) and "[click](http://x)" in plain(rendered)
    assert "a" not in tags(rendered) and "img" not in tags(rendered) and "em" not in tags(rendered)
    assert tags(rendered)["li"] == 3 and tags(rendered)["h2"] == 4  # the errors are one item each
    assert not any("XP 300/300" in h for h in re.findall(r"<h[1-6]>(.*?)</h[1-6]>", rendered))


# --- the pull request's unverified grade ----------------------------------------------------


def test_a_pull_requests_grade_is_said_unverified_and_its_text_inert():
    from autograder.github.api import unverified_report

    results = {
        "course": HOSTILE,
        "language": "es",
        "xp": 300,
        "xp_max": 300,
        "score": 600,
        "max_score": 600,
        "lessons": [
            {
                "id": "03",
                "title": HOSTILE,
                "score": 0,
                "max_score": 100,
                "xp": 0,
                "xp_max": 50,
                "completed": False,
                "checks": [{"id": "a`b|" + ESCAPES, "status": "failed"}],
            }
        ],
    }
    body, status = unverified_report(results, "es", "https://github.example/o/r/actions/runs/1")
    assert status.startswith("Práctica, sin verificar") and "XP 300/300" not in status
    assert body.startswith("> [!WARNING]\n> **Nota de práctica, sin verificar.**")
    rendered = to_html(body)
    assert no_controls(body) and "## ✔ XP 300/300" in plain(rendered)
    assert re.findall(r"<h[1-6]", rendered) == [] and "img" not in tags(rendered)
    assert re.findall(r'<a href="([^"]*)"', rendered) == ["https://github.example/o/r/actions/runs/1"]
    english, status_en = unverified_report({**results, "language": "en"}, "es")
    assert status_en.startswith("Practice, unverified") and "Practice grade, unverified." in english
    for bad in (
        {**results, "xp": "300"},
        {**results, "xp": True},
        {**results, "xp": 10**9},
        {**results, "lessons": [{"id": 3}]},
        {**results, "lessons": "x"},
    ):
        with pytest.raises(ValueError):
            unverified_report(bad, "es")


def test_workflow_annotations_carry_no_escape_sequence(course, tmp_path):
    """`autograder ci report`'s annotations (printed in the job's log, where `gh run view --log`
    would show them on a terminal): one line each, no control character."""
    from autograder.github.steps import annotations

    lines = annotations(course, hostile_result(), "es", tmp_path)
    assert len(lines) == 1 and lines[0].startswith("::error file=exercises/03-atencion-causal/")
    assert no_controls(lines[0]) and "␛]52;c;SGVsbG8=␇" in lines[0]
