"""Every way a result is shown: terminal text, Markdown, JSON, Gradescope, figures.

Owns: output.py (text, Markdown and JSON of a CourseResult), formats.py (Gradescope's
results.json), figures.py and attention_png.py (the pictures feedback names).

May import: core, engine.
"""
