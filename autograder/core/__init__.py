"""Plain data and the rules every layer shares; imports nothing else of ours.

Owns: the course manifest and its schema (manifest.py, course.schema.json), the result model
and how lessons' isolation records combine (results.py), message catalogs (i18n.py, reading
autograder/messages/), the local and remote grading history model (history.py), learner text
made inert for terminals and Markdown (neutral.py), which files of a folder count
(files.py), the grammar of TODO regions (regions.py), the line a TODO points at (locate.py), one
git runner (git.py), a portable file lock and whole-line appends (file_lock.py), YAML loading
(yaml_loader.py), the JSON Schemas' loading (json_schema.py), and the roster: its one versioned
schema, read from YAML or CSV (roster.py, roster.schema.json) and updated in place
(roster_update.py).

May import: nothing of ours.
"""
