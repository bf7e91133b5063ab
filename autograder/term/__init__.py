"""The instructor's term: deadlines, the late policy, which submission counts, LMS files.

Owns: each learner's due dates, with the roster's extensions applied and checked against
course.yml (deadlines.py); how late a submission is and what that costs its grade (policy.py);
which of a learner's official submissions of a lesson counts, latest or best (counting.py); the
gradebook files an LMS imports (lms.py). What course.yml and the roster say is read by core
(manifest.py: Course.term, Lesson.due and Lesson.late; roster.py: Roster.extensions). Everything
here is pure: it works on plain data that cohort and the service hand it (submission times,
grades) and reads no file, clock or network.

May import: core.
"""
