"""Pieces of hostile learner code that several test files plant into submissions."""

# Once per sandbox, whatever worker runs it: the flag lives in the worker's home ($TMPDIR),
# which outlives each worker (the submission's own folder is read-only to a root grader's worker).
FIRST_CALL = """
import os as _os, tempfile as _tempfile


def _first_call(name):
    flag = _os.path.join(_tempfile.gettempdir(), name)
    if _os.path.exists(flag):
        return False
    open(flag, "w").close()
    return True
"""
