//! How PostgreSQL rows read as [`Columns`].

use sqlx::Row;
use sqlx::postgres::PgRow;

use crate::store::StoreError;
use crate::store::rows::Columns;

impl Columns for PgRow {
    fn opt_int(&self, column: &str) -> Result<Option<i64>, StoreError> {
        Ok(self.try_get(column)?)
    }

    fn opt_text(&self, column: &str) -> Result<Option<String>, StoreError> {
        Ok(self.try_get(column)?)
    }

    fn flag(&self, column: &str) -> Result<bool, StoreError> {
        Ok(self.try_get(column)?)
    }
}
