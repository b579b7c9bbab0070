//! The scheduler of recurring schedules (docs/DESIGN.md §5.14): every instance with a
//! worker passes over the enabled schedules whose next period starts within
//! [`LEAD_MS`], holds each one it makes periods for ([`HOLD_MS`]), and writes each
//! period's jobs in the transaction that moves the schedule's cursor past the period,
//! fenced by its hold ([`period::write_period`]): only if the schedule is still as it
//! read it and still its own. A scheduler that stalled past its hold (a frozen
//! process) writes nothing once another has taken the schedule over, so a period is
//! made by one scheduler or passed by (skipped) by another, never both; a crash
//! between two periods leaves the cursor after the last one written. The jobs'
//! idempotency on subscriber and event id stays the guarantee of one job per period
//! and subscriber (a manual run, a job made before the cursor was fenced).

pub mod period;

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::domain::job_template::JobLimits;
use crate::domain::recurrence::Recurrence;
use crate::domain::recurring::{LEAD_MS, PassPlan, plan_pass};
use crate::domain::schedule_quota::ScheduleQuotas;
use crate::domain::{Clock, Timestamp};
use crate::store::{
    PeriodFence, Schedule, ScheduleAdvance, ScheduleDefinition, ScheduleSeen, SharedStore,
    StoreError,
};
use period::{PeriodError, PeriodJobs, Written, plan_period, recurrence_of, write_period};

/// How often the scheduler looks for due schedules: well within [`LEAD_MS`], so a
/// period's jobs are stored before it starts.
pub const POLL: Duration = Duration::from_secs(1);

/// Most schedules one read takes; a pass reads again while reads come back full.
const DUE_BATCH: u32 = 100;

/// How many schedules one pass makes periods for at once: a schedule whose period fans
/// out to thousands of subscribers does not hold the others back.
const AT_ONCE: usize = 8;

/// Most passes running at once in one instance ([`Scheduler::run`]).
pub const PASSES_AT_ONCE: usize = 4;

/// How long a scheduler holds a schedule it makes periods for: other instances pass it
/// by meanwhile, and take it over once this has passed (its scheduler died; a period
/// made later than [`LEAD_MS`] after its start then counts as missed), in
/// milliseconds. Longer than a 10,000-job period takes to write; a hold that runs out
/// mid-way only lets a second instance make the same jobs.
pub const HOLD_MS: u64 = 10_000;

/// What one pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassReport {
    /// Schedules whose cursor moved.
    pub schedules: usize,
    /// Periods whose jobs were created (or found already there).
    pub periods: usize,
    /// Periods skipped: missed ones by their catch-up policy, and those of a schedule
    /// over its quota ([`ScheduleQuotas::judge`]).
    pub skipped: u64,
    /// Periods refused (see [`PeriodError::Refused`]).
    pub refused: usize,
}

impl PassReport {
    fn add(&mut self, other: PassReport) {
        self.schedules += other.schedules;
        self.periods += other.periods;
        self.skipped += other.skipped;
        self.refused += other.refused;
    }
}

/// Creates the jobs of due periods.
#[derive(Clone)]
pub struct Scheduler {
    store: SharedStore,
    clock: Arc<dyn Clock>,
    limits: JobLimits,
    quotas: ScheduleQuotas,
}

impl Scheduler {
    /// A scheduler over `store`, reading `clock`, making jobs under `limits` (the
    /// API's: the same rules as a job posted), under the default quotas.
    pub fn new(store: SharedStore, clock: Arc<dyn Clock>, limits: JobLimits) -> Self {
        Scheduler {
            store,
            clock,
            limits,
            quotas: ScheduleQuotas::default(),
        }
    }

    /// The same scheduler bounding each schedule by `quotas` (the server's; see
    /// [`ScheduleQuotas::judge`]).
    pub fn with_quotas(mut self, quotas: ScheduleQuotas) -> Self {
        self.quotas = quotas;
        self
    }

    /// Starts a pass every [`POLL`] until `stop`, without waiting for the passes still
    /// running (at most [`PASSES_AT_ONCE`]): a schedule whose period fans out to
    /// thousands of subscribers is held by the pass making it, and the next passes make
    /// the other schedules' periods meanwhile. A failed pass is logged and the next one
    /// tries again. Stopping waits for the passes running.
    pub async fn run(self, stop: CancellationToken) {
        tracing::info!(
            poll_ms = POLL.as_millis() as u64,
            lead_ms = LEAD_MS,
            "scheduler of recurring schedules running"
        );
        let mut ticks = tokio::time::interval(POLL);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut passes = JoinSet::new();
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                _ = ticks.tick() => {}
            }
            while passes.try_join_next().is_some() {}
            if passes.len() >= PASSES_AT_ONCE {
                continue;
            }
            let this = self.clone();
            passes.spawn(async move {
                if let Err(error) = this.pass(this.clock.now()).await {
                    tracing::warn!(%error, "the scheduler's pass failed; trying again");
                }
            });
        }
        // The passes running finish (each releases the schedules it holds), so a
        // restart finds no schedule held by a pass that no longer runs.
        while passes.join_next().await.is_some() {}
    }

    /// One pass at `now`: every enabled schedule whose cursor is at or before `now +`
    /// [`LEAD_MS`] and that no other scheduler holds, [`AT_ONCE`] at a time, each held
    /// while its periods are made and read at its own `now` (the clock's, when later).
    /// The store unavailable ends the pass (the schedules not reached keep their
    /// cursor and are passed again); another store error for one schedule is logged,
    /// and the pass goes on with the others.
    pub async fn pass(&self, now: Timestamp) -> Result<PassReport, StoreError> {
        let mut report = PassReport::default();
        loop {
            let due = self
                .store
                .due_schedules(now.plus_ms(LEAD_MS), DUE_BATCH, now)
                .await?;
            let full = due.len() == DUE_BATCH as usize;
            let before = report.schedules;
            let mut unavailable = None;
            let mut waiting = due.into_iter();
            let mut running = JoinSet::new();
            loop {
                while unavailable.is_none() && running.len() < AT_ONCE {
                    let Some(schedule) = waiting.next() else {
                        break;
                    };
                    let this = self.clone();
                    running.spawn(async move {
                        let id = schedule.definition.id.clone();
                        let mut report = PassReport::default();
                        let result = this.pass_one(schedule, now, &mut report).await;
                        (id, report, result)
                    });
                }
                let Some(joined) = running.join_next().await else {
                    break;
                };
                let (id, one, result) = match joined {
                    Ok(done) => done,
                    Err(error) => {
                        tracing::error!(%error, "a schedule's pass panicked");
                        continue;
                    }
                };
                report.add(one);
                match result {
                    Ok(true) => report.schedules += 1,
                    Ok(false) => {}
                    Err(error) if error.is_transient() => unavailable = Some(error),
                    // One schedule's failure never holds the others back; its hold
                    // ends at its expiry, and a later pass tries it again.
                    Err(error) => {
                        tracing::error!(schedule_id = %id, %error,
                            "a schedule's pass failed; the other schedules go on");
                    }
                }
            }
            if let Some(error) = unavailable {
                return Err(error);
            }
            // Another read only while this one was full and moved something (a
            // schedule another instance moved first would be read again forever).
            if !full || report.schedules == before {
                return Ok(report);
            }
        }
    }

    /// Creates `schedule`'s due periods and moves its cursor; whether it moved.
    async fn pass_one(
        &self,
        schedule: Schedule,
        now: Timestamp,
        report: &mut PassReport,
    ) -> Result<bool, StoreError> {
        let definition = &schedule.definition;
        let Some(cursor) = schedule.next_period else {
            return Ok(false);
        };
        // The instant of this schedule's pass: a pass over many schedules takes time.
        let now = now.max(self.clock.now());
        let hold = now.plus_ms(HOLD_MS);
        if !self
            .store
            .lease_schedule(&definition.id, schedule.seen(), hold, now)
            .await?
        {
            // Another instance holds it, or moved it since it was read.
            return Ok(false);
        }
        let recurrence = match recurrence_of(definition) {
            Ok(recurrence) => recurrence,
            Err(reason) => {
                tracing::warn!(schedule_id = %definition.id, reason = reason.as_str(),
                    "a schedule's timing cannot be read; it stops");
                let advance = ScheduleAdvance {
                    next_period: None,
                    run: None,
                    error: Some(reason),
                };
                return self
                    .store
                    .advance_schedule(&definition.id, schedule.seen(), advance)
                    .await;
            }
        };
        let plan = plan_pass(&recurrence, cursor, now, definition.catch_up);
        let mut progress = Progress::new(&schedule, &plan);
        for start in plan.create {
            let fence = PeriodFence {
                schedule_id: definition.id.clone(),
                seen: progress.seen,
                held_until: hold,
                next_period: recurrence.next_after(start),
            };
            let next = fence.next_period;
            let made = self
                .make_period(
                    definition,
                    &recurrence,
                    start,
                    now,
                    progress
                        .last_made
                        .as_ref()
                        .map(|(at, id)| (*at, id.as_str())),
                    fence,
                )
                .await?;
            if !progress.record(made, start, next, report) {
                return Ok(progress.moved);
            }
        }
        self.close(progress, report).await
    }

    /// The closing write of a pass of one schedule: its cursor, last run and last
    /// error, and the end of its hold, if its cursor is as this pass left it; whether a
    /// write of this pass moved the cursor.
    async fn close(
        &self,
        progress: Progress<'_>,
        report: &mut PassReport,
    ) -> Result<bool, StoreError> {
        let Progress {
            schedule_id,
            advance,
            mut passed,
            seen,
            moved,
            ..
        } = progress;
        let closed = self
            .store
            .advance_schedule(schedule_id, seen, advance)
            .await?;
        if closed {
            passed.count(schedule_id, report);
        }
        Ok(moved || closed)
    }

    /// Makes the period of `definition` (periods by `recurrence`) starting at `start`,
    /// at `now`, the last period made being `last_made` (its start and event id): its
    /// jobs, unless this period comes too soon after the last one made (the schedule
    /// is over its quota, or its timing changed since; [`ScheduleQuotas::judge`], with
    /// the jobs its targets make now), or the period cannot be made.
    async fn make_period(
        &self,
        definition: &ScheduleDefinition,
        recurrence: &Recurrence,
        start: Timestamp,
        now: Timestamp,
        last_made: Option<(Timestamp, &str)>,
        fence: PeriodFence,
    ) -> Result<Made, StoreError> {
        let plan = match plan_period(&self.store, definition, start, now, self.limits).await {
            Ok(plan) => plan,
            Err(PeriodError::Refused(reason)) => {
                return Ok(Made::Refused {
                    reason,
                    written: false,
                });
            }
            Err(PeriodError::Store(error)) => return Err(error),
        };
        let jobs = u64::try_from(plan.jobs.len()).unwrap_or(u64::MAX);
        let previous = recurrence.latest_at_or_before(start.minus_ms(1));
        let quota = self
            .quotas
            .judge(jobs, (start, &plan.event_id), previous, last_made);
        if !quota.make {
            let reason = quota.over.unwrap_or_default();
            return Ok(Made::OverQuota(reason));
        }
        Ok(
            match write_period(&self.store, definition, plan, Some(fence)).await? {
                Written::Made(made) => Made::Jobs(made, quota.over),
                Written::Refused(reason) => Made::Refused {
                    reason,
                    written: true,
                },
                Written::Fenced => Made::Fenced,
            },
        )
    }
}

/// Where a pass of one schedule stands after each of its periods.
struct Progress<'a> {
    /// The schedule.
    schedule_id: &'a str,
    /// Its closing write: the cursor after the pass, the last run, the last error.
    advance: ScheduleAdvance,
    /// The periods passed by and not counted yet.
    passed: Passed,
    /// The cursor as this pass last wrote it (or read it).
    seen: ScheduleSeen,
    /// Whether a write of this pass moved the cursor.
    moved: bool,
    /// The start and event id of the last period made: by this pass, or the schedule's
    /// last run (kept across PUTs, so a re-timed schedule is spaced from it too).
    last_made: Option<(Timestamp, String)>,
}

impl<'a> Progress<'a> {
    /// Before the first period of `plan`, a pass of `schedule`.
    fn new(schedule: &'a Schedule, plan: &PassPlan) -> Self {
        Progress {
            schedule_id: &schedule.definition.id,
            advance: ScheduleAdvance {
                next_period: plan.next_period,
                run: None,
                error: None,
            },
            passed: Passed {
                missed: plan.skipped,
                ..Passed::default()
            },
            seen: schedule.seen(),
            moved: false,
            last_made: schedule
                .last_run
                .as_ref()
                .map(|run| (run.period, run.event_id.clone())),
        }
    }

    /// Records what became of the period starting at `start`, the cursor after it
    /// being `next` once written; false when the pass of this schedule stops (its
    /// write was fenced out).
    fn record(
        &mut self,
        made: Made,
        start: Timestamp,
        next: Option<Timestamp>,
        report: &mut PassReport,
    ) -> bool {
        let (schedule_id, period) = (self.schedule_id, start.to_rfc3339());
        match made {
            Made::Jobs(made, over) => {
                self.written(next, report);
                report.periods += 1;
                crate::metrics::schedule_periods("created", 1);
                self.last_made = Some((start, made.run.event_id.clone()));
                self.advance.run = Some(made.run);
                // A period made clears an earlier period's refusal, unless some of its
                // event ids are another job's or the schedule is over its quota.
                self.advance.error = made.taken.or(over);
            }
            Made::OverQuota(reason) => {
                self.passed.over_quota += 1;
                tracing::info!(schedule_id, %period, reason = reason.as_str(),
                    "a schedule's period skipped");
                self.advance.error = Some(reason);
            }
            Made::Refused { reason, written } => {
                self.passed.refused += 1;
                tracing::warn!(schedule_id, %period, reason = reason.as_str(),
                    "a schedule's period created no job");
                if written {
                    self.written(next, report);
                }
                self.advance.error = Some(reason);
            }
            Made::Fenced => {
                tracing::info!(schedule_id, %period,
                    "another scheduler took the schedule over: this pass wrote nothing of \
                     its period and leaves it");
                return false;
            }
        }
        true
    }

    /// A write of this pass moved the cursor to `next`: what it passed by counts.
    fn written(&mut self, next: Option<Timestamp>, report: &mut PassReport) {
        self.passed.count(self.schedule_id, report);
        self.seen.next_period = next;
        self.moved = true;
    }
}

/// The periods a pass of one schedule passed by since its last write that moved the
/// schedule's cursor: counted (and the missed ones logged) only once a later write
/// moves the cursor past them, so a pass whose writes another scheduler fenced out
/// counts nothing that the other counts or makes.
#[derive(Debug, Default)]
struct Passed {
    /// Missed periods skipped by the catch-up policy.
    missed: u64,
    /// Periods skipped because the schedule is over its quota.
    over_quota: u64,
    /// Periods refused.
    refused: usize,
}

impl Passed {
    /// Counts them in `report` and the metrics, and starts again from none.
    fn count(&mut self, schedule_id: &str, report: &mut PassReport) {
        let skipped = self.missed + self.over_quota;
        if skipped > 0 {
            report.skipped += skipped;
            crate::metrics::schedule_periods("skipped", skipped);
        }
        if self.missed > 0 {
            tracing::info!(schedule_id, skipped = self.missed, "missed periods skipped");
        }
        if self.refused > 0 {
            report.refused += self.refused;
            crate::metrics::schedule_periods("refused", self.refused as u64);
        }
        *self = Passed::default();
    }
}

/// What became of one period of a pass.
enum Made {
    /// Its jobs were made (or found already there); with why the schedule is over its
    /// quota, when it is.
    Jobs(PeriodJobs, Option<String>),
    /// Skipped: the schedule is over its quota, and the period came too soon after the
    /// last one made.
    OverQuota(String),
    /// It has no job of its own (see [`PeriodError::Refused`] and [`Written::Refused`]);
    /// `written`: the cursor moved past it (the fenced write committed).
    Refused {
        /// Why.
        reason: String,
        /// Whether the cursor moved past it.
        written: bool,
    },
    /// Another scheduler took the schedule over, or a put restarted it: nothing of the
    /// period was written.
    Fenced,
}
