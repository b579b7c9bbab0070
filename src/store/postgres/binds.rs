//! Binding a [`Statement`] built by [`crate::store::dialect`] for PostgreSQL.

use sqlx::postgres::PgArguments;
use sqlx::{Arguments, AssertSqlSafe};

use crate::store::StoreError;
use crate::store::dialect::{Statement, Value};

/// The SQL text of `statement` and its values as PostgreSQL arguments.
pub fn bound(statement: &Statement) -> Result<(AssertSqlSafe<String>, PgArguments), StoreError> {
    let mut arguments = PgArguments::default();
    for value in statement.values() {
        match value {
            Value::Text(text) => arguments.add(text.clone()),
            Value::Int(n) => arguments.add(*n),
            Value::OptInt(n) => arguments.add(*n),
        }
        .map_err(|e| StoreError::Internal(format!("cannot bind a value: {e}")))?;
    }
    Ok((AssertSqlSafe(statement.sql()), arguments))
}
