"""The learner's loop: `grade`, `check`, `watch`, `hint`, `progress` and the attention viewer.

Owns: the one next-step rule (steps.py), the learner's lesson folders (folders.py), the local
.autograder/ store (store.py), small terminal helpers (terminal.py), and the commands
(grade.py, check.py, watch.py with watch_changes.py and watch_render.py, hints.py, progress.py,
viewer.py with attention_probe.py; grade.py is also what the workflow and instructors run on
one submission).

May import: core, sandbox, engine, render.
"""
