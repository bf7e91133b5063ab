"""Mutation testing of the lessons' hidden graders (issue 31): a bench command, not CI.

    python3 -m bench.mutation [--lesson ID] [--todo ID] [--shard I/N] [--sample K] [--jobs N]
                              [--run DIR] [--report]

Owns: the mutation operators (operators.py), the mutants of each TODO region of the solutions
(mutants.py), grading them through grade-all's warm pool and judging each outcome (runner.py),
the resumable results (store.py) and the tables (report.py). The oracle that sorts survivors
into equivalent mutants and real gaps is bench/mutation/oracle (its own owner, imported lazily).

May import: autograder (core, course, cohort's pool and shard helpers, engine's result JSON
reader), libcst, and bench.mutation.oracle (lazily, when it exists). Never imported by autograder.
"""
