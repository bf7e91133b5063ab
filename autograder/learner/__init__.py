"""The learner's loop: `check`, `watch`, `hint`, `progress` and the attention viewer.

Owns: the one next-step rule (steps.py), the learner's lesson folders (folders.py), the local
.autograder/ store (store.py), small terminal helpers (terminal.py), and the commands
(check.py, watch.py, hints.py, progress.py, viewer.py with attention_probe.py).

May import: core, sandbox, engine, render.
"""
