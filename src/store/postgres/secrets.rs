//! The start-up check of stored secrets in PostgreSQL.

use sqlx::PgPool;

use crate::store::secrets::SecretStatements;

/// Every subscriber's stored secrets.
const STORED: &str = "SELECT id, secret, previous_secret FROM subscribers";

/// Writes subscriber `$1`'s secrets sealed, if its secret is still `$4`.
const RESEAL: &str = "UPDATE subscribers SET secret = $2, \
    previous_secret = COALESCE($3, previous_secret) \
    WHERE id = $1 AND secret = $4";

impl SecretStatements for PgPool {
    const STORED: &'static str = STORED;
    const RESEAL: &'static str = RESEAL;
}
