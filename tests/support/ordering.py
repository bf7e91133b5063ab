"""How the suite hands its tests to pytest-xdist's workers: the longest first, and the tests that
share an expensive module fixture to one worker.

The suite is mostly real gradings, installs and servers, and a handful of tests take 15 s to two
minutes each. In collection order several of them come near the end, and the run waits on them
while the other workers sit idle; started first, they overlap with everything else (with
`--dist loadgroup`, an idle worker takes the next test as soon as it is free). The list holds test ids
(without parameters) measured at 12 s or more with `pytest -n auto --durations=150` on the
2-core CI machine, longest first; an id that no longer exists is simply not found. The order
changes only when a test starts, never what it asserts.

A module-scoped fixture is made once per worker that runs a test of its module: a cohort graded
in shards (tests/cohort/test_batch.py), nbgrader's release of two lessons, a PostgreSQL server
or a Chromium each cost tens of seconds, and spread over three workers they were made three
times. SHARED_FIXTURES names them by module; the tests that use one go to one worker together
(an xdist_group per module), every other test still goes wherever a worker is free."""

from __future__ import annotations

LONGEST_FIRST = (
    "tests/course/test_devcontainer.py::test_post_create_installs_a_working_course_in_a_fresh_venv",
    "tests/service/test_distributed.py::test_a_burst_is_graded_once_each_by_both_workers_as_autograder_grade_grades_it",
    "tests/service/test_distributed.py::test_a_worker_killed_mid_grading_and_the_service_restarted_lose_nothing",
    "tests/service/test_distributed.py::test_a_submission_that_loses_every_worker_ends_as_worker_lost",
    "tests/service/test_distributed.py::test_other_graders_are_refused_and_a_regrade_never_delays_a_push",
    "tests/course/test_notebooks.py::test_autograde_gives_the_points_of_autograder_grade",
    "tests/service/test_worker.py::test_a_worker_killed_or_stopped_mid_grading_loses_nothing_and_one_result_is_recorded",
    "tests/cohort/test_batch.py::test_a_crashed_or_overlong_grading_costs_only_that_learner",
    "tests/cohort/test_observations.py::test_a_forged_commit_date_counts_for_nothing_the_fetch_time_does",
    "tests/service/test_submit_workflow.py::test_the_real_service_grades_the_push_and_the_job_shows_its_verdict",
    "tests/sandbox/test_shared_zygote.py::test_a_killed_grading_process_leaves_the_zygote_and_the_other_workers_alone",
    "tests/cohort/test_batch.py::test_rerunning_is_idempotent_and_shards_match_one_run",
    "tests/sandbox/test_portable.py::test_the_stubs_score_zero_under_the_cli_which_says_so_in_one_line",
    "tests/sandbox/test_hostile.py::test_infinite_loop_ignoring_signals_in_forward",
    "tests/sandbox/test_process_walls.py::test_no_process_but_its_own_through_the_cli",
    "tests/learner/test_demo.py::test_the_demo_trains_the_solutions_and_prints_a_sample",
    "tests/sandbox/test_hostile.py::test_infinite_loop_ignoring_signals_at_import",
    "tests/sandbox/test_portable.py::test_a_hang_a_crash_a_flood_a_process_left_behind_and_an_exit_at_import_are_contained",
    "tests/sandbox/test_shared_zygote.py::test_two_grading_processes_fork_their_workers_from_one_zygote",
    "tests/sandbox/test_portable.py::test_a_reverted_todo_of_each_lesson_is_caught",
    "tests/course/test_notebooks.py::test_autograde_lesson01_with_its_corpus",
    "tests/cohort/test_batch.py::test_a_killed_run_resumes_without_regrading_what_it_finished",
    "tests/test_cli_language.py::test_a_wrong_submission_folder_is_reported_once_without_grading",
    "tests/course/test_release.py::test_the_release_grades_finished_lessons_in_practice_mode",
    "tests/service/test_service_end_to_end.py::test_the_export_is_the_gradebook_and_csvs_of_each_learners_latest_grade",
    "tests/sandbox/test_portable.py::test_every_solution_gets_full_marks_and_the_result_says_portable",
    "tests/service/test_service_end_to_end.py::test_a_push_is_graded_with_the_hidden_graders_as_autograder_grade_grades_it",
    "tests/mutation/test_oracle.py::test_lesson01_reference_equivalent_mutant_differs_loop_times_out",
    "tests/engine/test_hangs.py::test_official_a_loop_only_some_inputs_reach_costs_only_the_checks_that_reach_it",
    "tests/cohort/test_observations.py::test_a_folder_keeps_the_time_it_was_first_seen_whatever_its_file_times",
    "tests/test_cli_language.py::test_argparse_own_errors_are_in_spanish",
    "tests/cohort/test_observations.py::test_shards_keep_their_own_logs_and_the_merge_keeps_both",
    "tests/learner/test_release_blame.py::test_check_in_the_release_blames_the_view_crash_as_official_grading_does",
    "tests/lessons/test_practice_agreement.py::test_practice_tells_what_the_official_grade_tells",
    "tests/service/test_service_end_to_end.py::test_the_service_killed_and_started_again_loses_nothing",
    "tests/cohort/test_batch.py::test_the_roster_clones_updates_and_reports_bad_repositories",
    "tests/sandbox/test_portable.py::test_a_spare_serves_one_sandbox_and_is_brand_new",
    "tests/service/test_service_end_to_end.py::test_a_worker_killed_mid_grading_is_replaced_and_the_submission_graded_once",
    "tests/service/test_worker.py::test_a_submission_is_fetched_graded_with_a_fresh_seed_and_recorded_once",
    "tests/learner/test_learner.py::test_xp_is_said_once_and_shown_one_way_after_a_regression",
    "tests/service/test_worker.py::test_a_worker_whose_grading_processes_cannot_start_stops_and_leaves_the_submission_queued",
    "tests/sandbox/test_lean_torch.py::test_meta_operations_and_optimizer_steps_need_no_dynamo_and_give_torchs_results",
    "tests/service/test_service_end_to_end.py::test_a_hostile_autograder_in_the_learners_repository_changes_nothing",
    "tests/core/test_neutral.py::test_autograder_grade_prints_a_learners_exception_inert",
    "tests/cohort/test_batch_outputs.py::test_an_output_that_cannot_be_written_is_named_and_the_others_are_kept",
    "tests/course/test_notebook_practice.py::test_practice_cell_runs_the_practice_tests_on_the_learners_cells",
    "tests/test_cli_language.py::test_help_speaks_spanish_by_default_and_english_when_asked",
    "tests/render/test_figures.py::test_learner_check_draws_into_its_local_folder",
    "tests/github/test_workflow_run.py::test_a_lesson_that_breaks_again_keeps_its_xp_but_says_it_fails_now",
    "tests/learner/test_watch_hang.py::test_check_of_a_looping_lesson_ends_within_two_timeouts_and_names_the_line",
    "tests/sandbox/test_lean_torch.py::test_install_after_torch_changes_nothing",
    "tests/sandbox/test_portable.py::test_no_worker_or_spare_outlives_the_cli",
    "tests/mutation/test_oracle.py::test_lesson03_reference_equivalent_mask_not_cropped_differs",
    "tests/github/test_workflow_run.py::test_a_hostile_engine_finds_no_grader_and_no_secret_to_copy",
    "tests/learner/test_hint_remembers_fix.py::test_hint_answers_a_fix_step_from_memory_until_a_file_changes",
    "tests/sandbox/test_isolation.py::test_the_hostile_catalog_is_contained_under_grade",
)
_RANK = {test: rank for rank, test in enumerate(LONGEST_FIRST)}

# module -> its module-scoped fixtures that take seconds to make (servers, browsers, gradings).
SHARED_FIXTURES = {
    "tests/cohort/test_batch.py": {"graded", "single", "untouched"},
    "tests/cohort/test_report_by_cause.py": {"graded"},
    "tests/cohort/test_term_grades.py": {"cohort_dir"},
    "tests/course/test_notebooks.py": {"released"},
    "tests/course/test_release.py": {"release"},
    "tests/course/test_release_has_no_reference.py": {"release"},
    "tests/course/test_recording.py": {"made", "solution_replayed", "stubs_official", "stubs_replayed"},
    "tests/engine/test_split.py": {"one_process", "one_process_two_lessons"},
    "tests/engine/test_own_pieces_load_error.py": {"courses"},
    "tests/github/test_workflow_run.py": {"release"},
    "tests/learner/test_release_blame.py": {"release"},
    "tests/learner/test_syntax_error_flow.py": {"courses"},
    "tests/learner/test_viewer.py": {"browser", "solution_viewer", "leaky_viewer"},
    "tests/sandbox/test_hostile.py": {"wrong_result", "cli_run"},
    "tests/sandbox/test_portable.py": {"portable_workers"},
    "tests/service/test_distributed.py": {"cluster", "postgres", "redis_url"},
    "tests/service/test_live_browser.py": {"browser", "served"},
    "tests/service/test_store.py": {"postgres"},
    "tests/service/test_service_end_to_end.py": {"service", "solved"},
    "tests/service/test_submit_workflow.py": {"release", "served", "endpoint"},
    "tests/service/test_worker.py": {"service", "solved"},
}


def longest_first(items: list) -> None:
    """Reorder pytest's collected `items` in place: the tests listed above first, in that order,
    then the rest as collected. Deterministic, so every xdist worker collects the same order."""
    items.sort(key=lambda item: _RANK.get(item.nodeid.split("[", 1)[0], len(_RANK)))


def shared_fixture_group(item) -> str | None:
    """The xdist_group of a test that uses one of its module's SHARED_FIXTURES, else None."""
    module = item.nodeid.split("::", 1)[0]
    if SHARED_FIXTURES.get(module, set()) & set(item.fixturenames):
        return module
    return None
