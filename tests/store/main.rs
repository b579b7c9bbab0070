//! The store conformance suite: one set of cases that every [`Store`] backend must pass.
//!
//! `store_suite!(backend, factory)` expands to one `#[tokio::test]` per case, named
//! `backend::module::case`; each test builds a fresh store with `factory` (an
//! expression, may `.await`, giving an `Option<`[`support::Backend`]`>` that also keeps
//! what the store needs alive; `None` skips a backend that is not available) and runs
//! `suite::module::case(store)`, or `suite::module::case(backend)` for a case that
//! takes the whole [`support::Backend`] (its database URL too, to open another store on
//! the same database or to read a column directly; see [`support::run_case`]). The
//! same cases run on SQLite and PostgreSQL.
//!
//! Cases marked `#[ignore = "bug: …"]` pin a known defect: they fail today and are
//! run with `cargo test --test store -- --ignored`.
//!
//! [`Store`]: deferhook::store::Store

mod finish;
#[path = "../common/pg.rs"]
mod pg;
mod replay_plans;
mod suite;
mod support;

use std::time::Duration;

/// How long one case may run; a deadlock or a cursor that never ends fails, not hangs.
const CASE_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs every case of [`suite`] against the store that `$factory` builds.
macro_rules! store_suite {
    ($backend:ident, $factory:expr) => {
        store_suite!(@expand $backend, $factory, {
            subscribers: [
                ping_answers,
                put_creates_with_defaults,
                put_again_updates_keeping_omitted_fields,
                rate_limit_some_none_clears_it,
                caller_given_secret_is_kept,
                get_unknown_is_none,
                list_pages_in_id_order,
            ],
            jobs: [
                create_returns_a_scheduled_job,
                repeat_is_existing_with_the_stored_payload,
                a_different_payload_is_a_conflict_and_writes_nothing,
                unknown_subscriber_writes_nothing,
                a_batch_creates_every_job_in_order,
                a_batch_mixes_existing_and_created,
                concurrent_repeats_create_one_job,
                concurrent_batches_in_any_order_succeed,
                concurrent_requests_succeed_or_fail_alone,
                concurrent_mixed_creates_never_deadlock,
                an_empty_batch_is_fine,
            ],
            listing: [
                get_unknown_job_is_none,
                list_filters_by_event_subscriber_and_state,
                list_pages_newest_first_without_repeats,
            ],
            claims: [
                claims_only_due_jobs,
                claim_marks_in_flight_and_persists_the_attempt,
                claim_respects_limit_and_takes_oldest_due_first,
                a_paused_subscriber_jobs_wait,
                concurrent_claims_are_disjoint,
                each_claimed_job_carries_its_subscriber_target,
                claim_respects_max_in_flight,
            ],
            limits: [
                a_rate_limit_paces_attempts,
                a_large_backlog_does_not_starve_the_others,
                the_subscriber_load_is_what_the_claim_sees,
                next_wake_respects_the_limits,
            ],
            reclaims: [
                a_held_lease_is_not_claimed_again,
                an_expired_lease_is_reclaimed,
                a_reclaim_never_exceeds_max_attempts,
            ],
            fencing: [
                delivered_applies_with_the_current_token,
                retryable_failure_sets_next_attempt_and_last_error,
                a_timeout_without_status_is_recorded,
                terminal_failure_makes_the_job_dead,
                a_stale_token_is_late_and_changes_only_its_attempt,
                a_batch_of_outcomes_answers_in_order,
                the_first_of_two_results_for_one_lease_applies,
                a_transition_into_in_flight_is_refused,
                a_410_pauses_the_subscriber,
            ],
            leases: [
                renewal_with_the_current_token_extends_the_lease,
                renewal_with_a_stale_token_changes_nothing,
                a_finished_job_lease_cannot_be_renewed,
                release_at_shutdown_retries_at_once_as_a_possible_duplicate,
                only_the_next_attempt_is_a_possible_duplicate,
            ],
            control: [
                cancel_applies_only_to_a_waiting_job,
                reschedule_moves_deliver_at_and_deadline,
                a_decision_on_a_stale_read_is_refused,
            ],
            replays: [
                a_dry_run_counts_matching_dead_jobs_and_changes_nothing,
                a_replay_matching_nothing_is_done_at_once,
                a_replay_requeues_at_its_pace_keeping_id_and_history,
                a_job_no_longer_dead_is_skipped_never_resent,
                a_cancelled_replay_requeues_nothing_more,
                a_replayed_job_gets_a_fresh_attempt_budget,
                a_replay_survives_the_purge_of_matched_jobs,
                a_replay_holds_while_its_last_burst_waits,
                a_burst_is_spread_over_its_interval,
                running_replays_share_one_rate_budget,
            ],
            deadlines: [
                waiting_jobs_past_their_deadline_die,
                a_live_lease_is_spared_an_expired_one_is_not,
                a_paused_subscriber_jobs_still_expire,
                a_paused_subscribers_expired_lease_goes_back_to_waiting,
                the_sweep_respects_its_limit,
            ],
            filters: [
                dead_reason_lists_dead_jobs_with_that_reason,
                created_bounds_follow_the_id_instant,
                dead_at_bounds_select_dead_jobs,
                all_filters_combine_across_pages,
            ],
            stats: [
                stats_count_jobs_and_find_the_last_success_and_failure,
                stats_of_a_quiet_or_unknown_subscriber,
            ],
            rotation: [
                rotation_keeps_the_previous_secret_until_it_expires,
                a_second_rotation_replaces_the_previous_secret,
                a_rotation_without_grace_keeps_no_previous_secret,
                rotating_an_unknown_subscriber_changes_nothing,
                a_put_with_a_secret_ends_the_grace_period,
            ],
            sealing: [
                secrets_are_stored_sealed_and_claimed_in_clear,
                plaintext_secrets_stay_readable_and_are_sealed_when_next_written,
                a_wrong_key_fails_only_its_subscribers_claims,
            ],
            retention: [
                old_delivered_and_cancelled_jobs_go_with_their_attempts,
                dead_jobs_go_only_by_their_own_cutoff,
                jobs_that_are_not_finished_are_never_purged,
                a_purge_deletes_at_most_its_limit,
                the_retention_task_purges_in_batches_until_done,
            ],
        });
    };
    (@expand $backend:ident, $factory:expr, {
        $($module:ident: [$($(#[$meta:meta])* $case:ident),* $(,)?]),* $(,)?
    }) => {
        mod $backend {
            $(
                mod $module {
                    #[allow(unused_imports)]
                    use super::super::*;

                    $(
                        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                        $(#[$meta])*
                        async fn $case() {
                            // `None`: the backend is not available here (said once).
                            let Some(backend) = $factory else { return };
                            let case =
                                crate::support::run_case(crate::suite::$module::$case, &backend);
                            tokio::time::timeout(crate::CASE_TIMEOUT, case)
                                .await
                                .expect("the case finished in time (a hang is a failure)");
                        }
                    )*
                }
            )*
        }
    };
}

/// A fresh, migrated SQLite store in its own temporary directory, removed when the
/// test ends.
async fn sqlite_store() -> Option<support::Backend> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite://{}", dir.path().join("deferhook.db").display());
    let store = deferhook::store::open(&url)
        .await
        .expect("open the SQLite store");
    Some(support::Backend::with_guard(store, url, dir))
}

/// A fresh, migrated PostgreSQL store in its own database, dropped when the test ends;
/// `None` when no server is reachable (see `common/pg.rs`).
async fn postgres_store() -> Option<support::Backend> {
    let database = pg::TestDatabase::create().await?;
    let store = deferhook::store::open(&database.url)
        .await
        .expect("open the PostgreSQL store");
    let url = database.url.clone();
    Some(support::Backend::with_guard(store, url, database))
}

store_suite!(sqlite, sqlite_store().await);
store_suite!(postgres, postgres_store().await);
