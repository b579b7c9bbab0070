//! Event types in PostgreSQL: the statements (see [`crate::store::event_types`]).

use crate::store::event_types::EventTypeStatements;
use sqlx::PgPool;

impl EventTypeStatements for PgPool {
    const FORGET: &'static str = "DELETE FROM subscriber_event_types WHERE subscriber_id = $1";
    const SUBSCRIBE: &'static str =
        "INSERT INTO subscriber_event_types (subscriber_id, pattern) VALUES ($1, $2)";
    const SET_LIST: &'static str = "UPDATE subscribers SET event_types = $2 WHERE id = $1";
}
