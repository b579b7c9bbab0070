//! Decoding the rows SQLite's own connections read (rusqlite: the batch writer and
//! the reader threads, `sqlite::direct`): sqlx decodes the rows of its connections,
//! this module those of rusqlite's, into the same row types, which the shared
//! subject files declare.
//!
//! A row type is declared once with [`row!`], which derives sqlx's `FromRow` and
//! implements [`LiteRow`] from the same field list; a tuple decodes its columns in
//! order. Values convert as sqlx converts them: an INTEGER to `i64` or `bool`
//! (non-zero is true), TEXT to `String`, NULL only to an `Option`.

use rusqlite::types::ValueRef;

use crate::store::StoreError;

/// A row read on the writer's connection, by column name (a struct) or position (a
/// tuple).
pub(crate) trait LiteRow: Sized {
    /// Decodes `row`.
    ///
    /// # Errors
    /// [`StoreError::Internal`] naming the column whose value has another type or is
    /// missing.
    fn from_lite(row: &rusqlite::Row<'_>) -> Result<Self, StoreError>;
}

/// A column's value as a Rust value.
pub(crate) trait LiteValue: Sized {
    /// Converts `value`; `Err` says what was found instead.
    fn from_value(value: ValueRef<'_>) -> Result<Self, String>;
}

impl LiteValue for i64 {
    fn from_value(value: ValueRef<'_>) -> Result<Self, String> {
        match value {
            ValueRef::Integer(n) => Ok(n),
            other => Err(format!("an integer, found {:?}", other.data_type())),
        }
    }
}

impl LiteValue for bool {
    fn from_value(value: ValueRef<'_>) -> Result<Self, String> {
        i64::from_value(value).map(|n| n != 0)
    }
}

impl LiteValue for String {
    fn from_value(value: ValueRef<'_>) -> Result<Self, String> {
        match value {
            ValueRef::Text(bytes) => String::from_utf8(bytes.to_vec())
                .map_err(|_| "text, found bytes that are not UTF-8".to_owned()),
            other => Err(format!("text, found {:?}", other.data_type())),
        }
    }
}

impl<T: LiteValue> LiteValue for Option<T> {
    fn from_value(value: ValueRef<'_>) -> Result<Self, String> {
        match value {
            ValueRef::Null => Ok(None),
            value => T::from_value(value).map(Some),
        }
    }
}

/// Column `column` (a name or a 0-based position) of `row` as a `T`.
///
/// # Errors
/// [`StoreError::Internal`] when the row has no such column or its value is not a `T`.
pub(crate) fn column<T: LiteValue, I: rusqlite::RowIndex + std::fmt::Debug + Copy>(
    row: &rusqlite::Row<'_>,
    column: I,
) -> Result<T, StoreError> {
    let value = row
        .get_ref(column)
        .map_err(|e| StoreError::Internal(format!("column {column:?}: {e}")))?;
    T::from_value(value)
        .map_err(|expected| StoreError::Internal(format!("column {column:?}: expected {expected}")))
}

macro_rules! tuple_row {
    ($($name:ident $index:tt),+) => {
        impl<$($name: LiteValue),+> LiteRow for ($($name,)+) {
            fn from_lite(row: &rusqlite::Row<'_>) -> Result<Self, StoreError> {
                Ok(($(column::<$name, usize>(row, $index)?,)+))
            }
        }
    };
}

tuple_row!(A 0);
tuple_row!(A 0, B 1);
tuple_row!(A 0, B 1, C 2);
tuple_row!(A 0, B 1, C 2, D 3);
tuple_row!(A 0, B 1, C 2, D 3, E 4);
tuple_row!(A 0, B 1, C 2, D 3, E 4, F 5);
tuple_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);

/// Declares a row type both drivers read, its fields listed once: the struct as
/// written, with `#[derive(sqlx::FromRow)]` added (sqlx's connections decode it), and
/// its [`LiteRow`] (rusqlite's do): each field read from the column of its name, a
/// field marked `#[sqlx(flatten)]` decoded from the same row by its own type.
macro_rules! row {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$($attr:tt)*])*
                $field_vis:vis $field:ident : $ty:ty
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(sqlx::FromRow)]
        $vis struct $name {
            $(
                $(#[$($attr)*])*
                $field_vis $field: $ty,
            )*
        }

        impl $crate::store::lite_rows::LiteRow for $name {
            #[allow(unused_variables)]
            fn from_lite(
                row: &::rusqlite::Row<'_>,
            ) -> Result<Self, $crate::store::StoreError> {
                Ok($name {
                    $(
                        $field: $crate::store::lite_rows::row!(
                            @value row $field $([$($attr)*])*
                        ),
                    )*
                })
            }
        }
    };
    (@value $row:ident $field:ident [sqlx(flatten)] $($rest:tt)*) => {
        $crate::store::lite_rows::LiteRow::from_lite($row)?
    };
    (@value $row:ident $field:ident [$($other:tt)*] $($rest:tt)*) => {
        $crate::store::lite_rows::row!(@value $row $field $($rest)*)
    };
    (@value $row:ident $field:ident) => {
        $crate::store::lite_rows::column($row, stringify!($field))?
    };
}
pub(crate) use row;

#[cfg(test)]
mod tests {
    use super::*;

    row! {
        #[derive(Debug)]
        struct Inner {
            b: Option<String>,
        }
    }

    row! {
        struct Outer {
            a: i64,
            flag: bool,
            /// Decoded from the same row.
            #[sqlx(flatten)]
            inner: Inner,
        }
    }

    fn read<T: LiteRow>(sql: &str) -> Result<T, StoreError> {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let mut statement = conn.prepare(sql).unwrap();
        let mut rows = statement.query([]).unwrap();
        T::from_lite(rows.next().unwrap().unwrap())
    }

    #[test]
    fn structs_read_by_name_and_flatten_tuples_by_position() {
        let outer: Outer = read("SELECT NULL AS b, 7 AS a, 2 AS flag").unwrap();
        assert_eq!((outer.a, outer.flag, outer.inner.b), (7, true, None));
        let inner: Inner = read("SELECT 'x' AS b").unwrap();
        assert_eq!(inner.b.as_deref(), Some("x"));
        let pair: (String, Option<i64>) = read("SELECT 'k', 3").unwrap();
        assert_eq!(pair, ("k".to_owned(), Some(3)));
    }

    #[test]
    fn a_wrong_type_or_a_missing_column_is_named() {
        let error = read::<(i64,)>("SELECT 'text'").unwrap_err().to_string();
        assert!(error.contains("expected an integer"), "{error}");
        let error = read::<(i64,)>("SELECT NULL").unwrap_err().to_string();
        assert!(error.contains("found Null"), "{error}");
        let error = read::<Inner>("SELECT 1 AS c").unwrap_err().to_string();
        assert!(error.contains("\"b\""), "{error}");
    }
}
