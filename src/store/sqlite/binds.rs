//! Binding a [`Query`] (a constant or a statement built by [`crate::store::dialect`]) for SQLite.

use std::borrow::Cow;

use sqlx::sqlite::SqliteArguments;
use sqlx::{Arguments, AssertSqlSafe, QueryBuilder, Sqlite};

use crate::store::StoreError;
use crate::store::dialect::{Part, Query, Statement, Value};

/// `values` as arguments (moved, not copied: a payload is bound once).
pub fn arguments(values: Vec<Value>) -> Result<SqliteArguments, StoreError> {
    let mut arguments = SqliteArguments::default();
    for value in values {
        match value {
            Value::Text(text) => arguments.add(text),
            Value::Int(n) => arguments.add(n),
            Value::OptInt(n) => arguments.add(n),
            Value::OptText(text) => arguments.add(text),
            Value::Bool(flag) => arguments.add(flag),
        }
        .map_err(|e| StoreError::Internal(format!("cannot bind a value: {e}")))?;
    }
    Ok(arguments)
}

/// The SQL text of `query` and its values as arguments.
pub fn bound(
    query: Query,
) -> Result<(AssertSqlSafe<Cow<'static, str>>, SqliteArguments), StoreError> {
    let (sql, values) = query.into_parts();
    Ok((AssertSqlSafe(sql), arguments(values)?))
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
            Part::Bind(Value::OptText(text)) => {
                query.push_bind(text.clone());
            }
            Part::Bind(Value::Bool(flag)) => {
                query.push_bind(*flag);
            }
        }
    }
}
