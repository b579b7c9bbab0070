//! The operator actions' names, as the audit trail records them (docs/DESIGN.md
//! §5.11), written once: the API's audited routes (`api::audit_actions`) and the
//! console's forms name their actions with these, so an action taken from either is
//! one action in the trail, and the listing's `action` filter knows every name.

/// Cancels a waiting job ([`super::job_control::cancel`]).
pub const JOB_CANCEL: &str = "job.cancel";
/// Makes a retrying job due now ([`super::job_control::retry`]).
pub const JOB_RETRY: &str = "job.retry";
/// Moves a scheduled job ([`super::job_control::reschedule`]).
pub const JOB_RESCHEDULE: &str = "job.reschedule";
/// Changes a destination's limit, pause or circuit ([`super::destinations::put`]).
pub const DESTINATION_PUT: &str = "destination.put";
/// Creates a replay ([`super::replays::create`]).
pub const REPLAY_CREATE: &str = "replay.create";
/// Cancels a replay ([`super::replays::cancel`]).
pub const REPLAY_CANCEL: &str = "replay.cancel";
/// Registers or replaces a subscriber ([`super::subscribers::put`]).
pub const SUBSCRIBER_PUT: &str = "subscriber.put";
/// Changes a subscriber ([`super::subscribers::patch`]).
pub const SUBSCRIBER_PATCH: &str = "subscriber.patch";
/// Pauses subscribers in bulk (`POST /v1/subscribers/pause`).
pub const SUBSCRIBER_PAUSE: &str = "subscriber.pause";
/// Resumes paused subscribers ([`super::subscribers::resume`]).
pub const SUBSCRIBER_RESUME: &str = "subscriber.resume";
/// Rotates a subscriber's signing secret ([`super::secrets::rotate`]).
pub const SUBSCRIBER_ROTATE_SECRET: &str = "subscriber.rotate_secret";
/// Deletes a subscriber and its history (`DELETE /v1/subscribers/{id}`).
pub const SUBSCRIBER_DELETE: &str = "subscriber.delete";
/// Creates or replaces a recurring schedule (`PUT /v1/schedules/{id}`).
pub const SCHEDULE_PUT: &str = "schedule.put";
/// Deletes a recurring schedule (`DELETE /v1/schedules/{id}`).
pub const SCHEDULE_DELETE: &str = "schedule.delete";
/// Runs a schedule's current period now (`POST /v1/schedules/{id}/run`).
pub const SCHEDULE_RUN: &str = "schedule.run";
/// A console login.
pub const CONSOLE_LOGIN: &str = "console.login";
/// A refused console login (recorded whole, answered 401 or 429).
pub const CONSOLE_LOGIN_FAILED: &str = "console.login_failed";
/// A console logout.
pub const CONSOLE_LOGOUT: &str = "console.logout";

/// The action names only the console records (its other actions are the API's and
/// have their names): the audit listing's `action` filter accepts these too.
pub const CONSOLE_ACTIONS: [&str; 3] = [CONSOLE_LOGIN, CONSOLE_LOGIN_FAILED, CONSOLE_LOGOUT];
