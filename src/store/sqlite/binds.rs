//! Binding a [`Statement`] built by [`crate::store::dialect`] for SQLite.

use sqlx::sqlite::SqliteArguments;
use sqlx::{Arguments, AssertSqlSafe, QueryBuilder, Sqlite};

use crate::store::StoreError;
use crate::store::dialect::{Part, Statement, Value};

/// The SQL text of `statement` and its values as SQLite arguments.
pub fn bound(
    statement: &Statement,
) -> Result<(AssertSqlSafe<String>, SqliteArguments), StoreError> {
    let mut arguments = SqliteArguments::default();
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

/// Appends `statement` to a sqlx builder, which writes its own placeholders.
pub fn push(query: &mut QueryBuilder<Sqlite>, statement: &Statement) {
    for part in statement.parts() {
        match part {
            Part::Sql(text) => {
                query.push(text);
            }
            Part::Bind(Value::Text(text)) => {
                query.push_bind(text.clone());
            }
            Part::Bind(Value::Int(n)) => {
                query.push_bind(*n);
            }
            Part::Bind(Value::OptInt(n)) => {
                query.push_bind(*n);
            }
        }
    }
}
