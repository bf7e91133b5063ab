"""Every way a result is shown: terminal text, Markdown, JSON, Gradescope, figures.

Owns: one module per format of a CourseResult: results_json.py (results.json, written and read
back), markdown.py (GitHub's job summary and comments), terminal.py (terminal text and the
console helpers), formats.py (Gradescope's results.json); labels.py (what they all say alike:
scores, points, a lesson's state, a check's label); output.py (the names callers import them
by); figures.py and attention_png.py (the pictures feedback names).

May import: core, engine.
"""
