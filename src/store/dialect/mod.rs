//! The one place that knows how the two databases spell dynamic SQL: placeholders
//! (`?n` in SQLite, `$n` in PostgreSQL) and SQLite's `INDEXED BY` hints. The statements
//! built at run time (the job listing with its filters, the replay match, the
//! multi-row job insert) are written here once, as SQL text with a list of
//! [`Value`]s that each backend binds. Fixed statements are plain constants in each
//! backend's own files.

pub mod inserts;
pub mod listing;
pub mod matching;

use std::borrow::Cow;

/// Which database a statement is written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// `?n` placeholders; its planner has no statistics, so statements name the index
    /// that serves them.
    Sqlite,
    /// `$n` placeholders; its planner picks indexes from statistics.
    Postgres,
}

impl Dialect {
    /// The `n`-th (1-based) placeholder of a statement built at run time. SQLite's is
    /// anonymous (`?`, bound in the order it appears; a statement built here never
    /// repeats a value): sqlx binds a numbered one (`?n`) by looking its name up, and
    /// `sqlite3_bind_parameter_name` walks the statement's list of names, so a
    /// 500-row insert (5,000 placeholders) spent quadratic time binding (a 50,000-job
    /// `burst` accepted 20 % fewer jobs/s with `?n` than with `?`).
    fn placeholder(self, n: usize) -> String {
        match self {
            Dialect::Sqlite => "?".to_owned(),
            Dialect::Postgres => format!("${n}"),
        }
    }

    /// What a bound `LIMIT` is written between: SQLite's is a cast (`LIMIT CAST(?
    /// AS INTEGER)`), since SQLite (3.51, the version bundled) reads a bare `LIMIT ?` value while
    /// planning and so prepares the statement again every time a value is bound to it,
    /// even the same one: a claim parsed its 60-line statement anew on every call, a
    /// quarter of the writer's time. Every fixed SQLite statement writes its `LIMIT`
    /// the same way.
    pub fn limit(self) -> (&'static str, &'static str) {
        match self {
            Dialect::Sqlite => (" LIMIT CAST(", " AS INTEGER)"),
            Dialect::Postgres => (" LIMIT ", ""),
        }
    }

    /// ` INDEXED BY index` where the planner must be told (SQLite), else nothing.
    pub fn index_hint(self, index: &str) -> String {
        match self {
            Dialect::Sqlite => format!(" INDEXED BY {index}"),
            Dialect::Postgres => String::new(),
        }
    }
}

/// A value bound to a placeholder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// TEXT.
    Text(String),
    /// A 64-bit integer (`INTEGER`, `BIGINT`).
    Int(i64),
    /// A nullable 64-bit integer.
    OptInt(Option<i64>),
    /// Nullable TEXT.
    OptText(Option<String>),
    /// A flag (`INTEGER` 0/1 in SQLite, `BOOLEAN` in PostgreSQL).
    Bool(bool),
}

/// A statement ready to run: its SQL text (a backend's constant, or a [`Statement`]
/// written out) and the values of its placeholders, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    sql: Cow<'static, str>,
    values: Vec<Value>,
}

impl Query {
    /// `sql`, with no values yet.
    pub fn new(sql: &'static str) -> Self {
        Query {
            sql: Cow::Borrowed(sql),
            values: Vec::new(),
        }
    }

    /// Binds the next placeholder to `value`.
    pub fn bind(mut self, value: Value) -> Self {
        self.values.push(value);
        self
    }

    /// Binds the next placeholder to a text.
    pub fn text(self, text: impl Into<String>) -> Self {
        self.bind(Value::Text(text.into()))
    }

    /// Binds the next placeholder to an integer.
    pub fn int(self, n: i64) -> Self {
        self.bind(Value::Int(n))
    }

    /// The SQL text and the values, in placeholder order, for a backend to bind.
    pub fn into_parts(self) -> (Cow<'static, str>, Vec<Value>) {
        (self.sql, self.values)
    }
}

impl From<Statement> for Query {
    fn from(statement: Statement) -> Self {
        let sql = Cow::Owned(statement.sql());
        let values = statement
            .parts
            .into_iter()
            .filter_map(|part| match part {
                Part::Bind(value) => Some(value),
                Part::Sql(_) => None,
            })
            .collect();
        Query { sql, values }
    }
}

/// One piece of a [`Statement`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    /// SQL text.
    Sql(String),
    /// A placeholder and the value bound to it.
    Bind(Value),
}

/// A statement built at run time, in one dialect: SQL text and the values its
/// placeholders take, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statement {
    dialect: Dialect,
    parts: Vec<Part>,
}

impl Statement {
    /// A statement in `dialect` that starts with `sql`.
    pub fn new(dialect: Dialect, sql: &str) -> Self {
        Statement {
            dialect,
            parts: vec![Part::Sql(sql.to_owned())],
        }
    }

    /// The dialect it is written in.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Appends SQL text.
    pub fn push(&mut self, sql: &str) -> &mut Self {
        self.parts.push(Part::Sql(sql.to_owned()));
        self
    }

    /// Appends a placeholder bound to `value`.
    pub fn bind(&mut self, value: Value) -> &mut Self {
        self.parts.push(Part::Bind(value));
        self
    }

    /// Appends ` LIMIT n` with `n` bound (see [`Dialect::limit`]).
    pub fn limit(&mut self, n: i64) -> &mut Self {
        let (before, after) = self.dialect.limit();
        self.push(before).bind(Value::Int(n)).push(after)
    }

    /// The pieces in order (for a builder that writes its own placeholders).
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// The SQL text, with this dialect's placeholders (see [`Dialect::placeholder`]).
    pub fn sql(&self) -> String {
        let mut sql = String::new();
        let mut bound = 0;
        for part in &self.parts {
            match part {
                Part::Sql(text) => sql.push_str(text),
                Part::Bind(_) => {
                    bound += 1;
                    sql.push_str(&self.dialect.placeholder(bound));
                }
            }
        }
        sql
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_written_in_each_dialect() {
        for (dialect, expected) in [
            (Dialect::Sqlite, "SELECT ?, '$.a', ?"),
            (Dialect::Postgres, "SELECT $1, '$.a', $2"),
        ] {
            let mut statement = Statement::new(dialect, "SELECT ");
            statement
                .bind(Value::Int(1))
                .push(", '$.a', ")
                .bind(Value::Text("x".into()));
            let (sql, values) = Query::from(statement).into_parts();
            assert_eq!(sql, expected);
            assert_eq!(values, [Value::Int(1), Value::Text("x".into())]);
        }
    }

    #[test]
    fn a_bound_limit_is_a_cast_in_sqlite() {
        for (dialect, expected) in [
            (Dialect::Sqlite, "SELECT 1 LIMIT CAST(? AS INTEGER)"),
            (Dialect::Postgres, "SELECT 1 LIMIT $1"),
        ] {
            let mut statement = Statement::new(dialect, "SELECT 1");
            statement.limit(5);
            assert_eq!(statement.sql(), expected);
        }
    }
}
