"""What a lesson's notebook takes from the lesson's README, and how it retells the sources' text.

The README's title and its `## ` sections become the notebook's markdown cells (build.py
decides which); the sections about the repository edition (its folders and commands) keep only
their `### ` subsections about the lesson itself, without the paragraphs that send the learner
to the repository's files or commands. A notebook learner has no README, no repository and no
`autograder` command: where the sources say README, the notebook says "este cuaderno"
(`notebook_text`, on markdown and code alike), and "`python data.py`" (a lesson file's own demo)
becomes the cell that runs it.
"""

from __future__ import annotations

import re

from autograder.core import i18n
from autograder.core.manifest import Lesson

README = "README.md"
# README sections that describe the repository edition (its folders and commands), not the
# lesson: left out of the notebook, whose own instructions replace them.
REPOSITORY_SECTIONS = ("Los TODO", "Cómo comprobar")
# Paragraphs left out of what is kept of those sections: they speak of the repository.
REPOSITORY_TEXT = re.compile(r"`autograder |`pytest |`python |exercises/|\.autograder/")
# The sources say README where the notebook has its own text instead (`notebook_text`).
README_MENTION = re.compile(r"\b(?:el )?README(?:\.md)?\b")
PYTHON_COMMAND = re.compile(r"`python (?:[\w.\-]+/)*(?P<file>[\w.\-]+\.py)`")
IDEA_SECTION = "La idea"  # every lesson README has one; the notebook is built around it
QUIZ_SECTION = "Comprueba tu comprensión"  # placed just above the quiz's answer cell


def readme_sections(text: str) -> tuple[str, list[tuple[str, str]]]:
    """A README as its text before the first `## ` heading and its (heading, section) pairs;
    a section keeps its heading line. Headings inside code fences do not count."""
    head: list[str] = []
    sections: list[tuple[str, list[str]]] = []
    fenced = False
    for line in text.replace("\r\n", "\n").split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("## "):
            sections.append((line[3:].strip(), [line]))
        elif sections:
            sections[-1][1].append(line)
        else:
            head.append(line)
    return "\n".join(head).strip(), [(heading, "\n".join(lines).strip()) for heading, lines in sections]


def notebook_text(text: str, language: str, readme_key: str = "readme_reference") -> str:
    """A lesson file's text as the notebook holds it: where it sends the learner to the README,
    it says the notebook instead (a comment or hint, so the line count, and every line number
    a traceback gives, stays the same). `language` is the sources' (course.yml's)."""
    return README_MENTION.sub(lambda _: i18n.translate(f"notebooks.{readme_key}", language), text)


def lesson_text(markdown: str, language: str) -> str:
    """A subsection of a README section about the repository, for the notebook: without its
    paragraphs about the repository's files and commands, and saying this notebook where it
    says README."""
    paragraphs = [p for p in re.split(r"\n\s*\n", markdown.strip()) if not REPOSITORY_TEXT.search(p)]
    return notebook_text("\n\n".join(paragraphs), language)


def with_demo_cells(markdown: str, lesson: Lesson, language: str) -> str:
    """ "`python data.py`" (a lesson file's own demo, its `if __name__ == "__main__":` block) as
    the notebook has it: that file's last cell, which runs the demo in the kernel."""

    def cell(match: re.Match) -> str:
        name = match["file"]
        return (
            i18n.translate("notebooks.demo_cell", language, file=name) if name in lesson.files else match[0]
        )

    return PYTHON_COMMAND.sub(cell, markdown)


def subsections(section: str) -> list[str]:
    """The `### ` subsections of a README section, each from its heading on."""
    found: list[list[str]] = []
    fenced = False
    for line in section.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("### "):
            found.append([line])
        elif found:
            found[-1].append(line)
    return ["\n".join(lines).strip() for lines in found]


def quiz_markdown(section: str, quiz_file: str, t) -> str:
    """The README's quiz section without its paragraphs about the quiz file, which in the
    notebook is the cell below: the notebook's own instruction takes their place."""
    heading, _, rest = section.partition("\n")
    paragraphs = [p for p in re.split(r"\n\s*\n", rest.strip()) if quiz_file not in p]
    return "\n\n".join([heading, t("quiz_instructions"), *paragraphs])
