"""The course maintainer's tools: stubs from solutions, the learner release, the Jupyter edition.

Owns: stubs.py (exercises/ and the graders' reference pieces generated from solutions/),
record.py (each lesson's recording of reference values, engine/recording.py's format),
release.py (the template repository learners fork), their commands (stubs_command.py,
record_command.py, release_command.py), notebooks/ (the nbgrader edition and its command) and templates/ (the
learners' README).

May import: core, sandbox, engine, render.
"""
