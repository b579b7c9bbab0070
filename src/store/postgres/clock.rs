//! The database server's clock in PostgreSQL, which every instance sharing the
//! database works by (docs/DESIGN.md §12).

use sqlx::PgPool;

use crate::domain::Timestamp;
use crate::store::StoreError;

/// The server's clock as the statement runs (`clock_timestamp()`, not the transaction's
/// start as `now()` would be), in whole milliseconds since the Unix epoch, rounded down
/// as the instances' clocks are.
const NOW: &str = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

/// Reads the server's clock.
pub(super) async fn now(db: &PgPool) -> Result<Timestamp, StoreError> {
    let ms: i64 = sqlx::query_scalar(NOW).fetch_one(db).await?;
    Ok(Timestamp::from_millis(ms))
}
