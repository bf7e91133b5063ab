"""Transformers desde cero: the grading engine.

The engine is machinery, not lesson material: learners never need to read it. Data flows one
way: course.yml (manifest) -> hidden graders (checks, run as pytest tests in this trusted
process, talking to the learner's code only through a sandboxed worker) -> results -> renderers.
"""

__version__ = "0.1.0"
