"""The untrusted side: processes that run a learner's code on the grader's behalf.

`supervisor.py` starts and contains `main.py`; nothing here decides a grade.
"""
