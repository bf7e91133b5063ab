"""What the tests share: the project's paths and the suite's seed, grading a folder with the real
engine, finding processes, the GitHub stand-in, the workflow runner, the made-up cohorts and
learner courses, and the variant catalogs' common helpers.

Each module is imported as `support.<module>` (pytest puts tests/ on the path); none imports
conftest.py, which holds only fixtures and pytest hooks.
"""
