"""Every way a result is shown: terminal text, Markdown, JSON, Gradescope, GitHub Classroom, figures.

Owns: output.py (text, Markdown and JSON of a CourseResult), formats.py (Gradescope and
Classroom), figures.py and attention_png.py (the pictures feedback names).

May import: core, engine.
"""
