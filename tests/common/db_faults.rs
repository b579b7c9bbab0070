//! Failures injected in the database itself, for black-box tests of the API and the
//! console (the worker's store is wrapped instead, tests/common/faulty_store.rs): a
//! trigger that refuses a kind of write while its fault is armed, or a table the
//! enrichment reads need renamed away. Each is armed and disarmed by the test, on both
//! backends, over a connection of its own.

use sqlx::{PgPool, SqlitePool};

use crate::app::Database;

/// A failure the database can be made to have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DbFault {
    /// Writing an audit entry (an insert into `audit`) fails: the entry cannot be begun.
    AuditEntry,
    /// Settling an audit entry (an update of `audit`) or withdrawing it (a delete)
    /// fails.
    AuditSettlement,
    /// Changing a job (an update of `jobs`: a cancel, a reschedule) fails.
    JobChange,
    /// Recording a schedule's last run (`last_period` changed) fails.
    ScheduleRunRecord,
    /// The attempt history cannot be read (the `attempts` table renamed away): a
    /// subscriber's health and load, read for the views that answer a write, fail.
    HistoryUnreadable,
}

impl DbFault {
    /// The name the triggers look for in `test_faults`.
    fn name(self) -> &'static str {
        match self {
            DbFault::AuditEntry => "audit_entry",
            DbFault::AuditSettlement => "audit_settlement",
            DbFault::JobChange => "job_change",
            DbFault::ScheduleRunRecord => "schedule_run_record",
            DbFault::HistoryUnreadable => "history_unreadable",
        }
    }
}

/// SQLite's triggers: each refuses its write while its fault's row is in `test_faults`.
const SQLITE_TRIGGERS: &str = "
CREATE TABLE test_faults (name TEXT PRIMARY KEY NOT NULL);
CREATE TRIGGER fault_audit_entry BEFORE INSERT ON audit
    WHEN EXISTS (SELECT 1 FROM test_faults WHERE name = 'audit_entry')
    BEGIN SELECT RAISE(ABORT, 'injected: audit_entry'); END;
CREATE TRIGGER fault_audit_settlement BEFORE UPDATE ON audit
    WHEN EXISTS (SELECT 1 FROM test_faults WHERE name = 'audit_settlement')
    BEGIN SELECT RAISE(ABORT, 'injected: audit_settlement'); END;
CREATE TRIGGER fault_audit_withdrawal BEFORE DELETE ON audit
    WHEN EXISTS (SELECT 1 FROM test_faults WHERE name = 'audit_settlement')
    BEGIN SELECT RAISE(ABORT, 'injected: audit_settlement'); END;
CREATE TRIGGER fault_job_change BEFORE UPDATE ON jobs
    WHEN EXISTS (SELECT 1 FROM test_faults WHERE name = 'job_change')
    BEGIN SELECT RAISE(ABORT, 'injected: job_change'); END;
CREATE TRIGGER fault_schedule_run_record BEFORE UPDATE OF last_period ON schedules
    WHEN NEW.last_period IS NOT OLD.last_period
     AND EXISTS (SELECT 1 FROM test_faults WHERE name = 'schedule_run_record')
    BEGIN SELECT RAISE(ABORT, 'injected: schedule_run_record'); END;
";

/// PostgreSQL's triggers: one function, named by each trigger's argument.
const POSTGRES_TRIGGERS: &str = "
CREATE TABLE test_faults (name TEXT PRIMARY KEY);
CREATE FUNCTION test_fault() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM test_faults WHERE name = TG_ARGV[0]) THEN
        RAISE EXCEPTION 'injected: %', TG_ARGV[0];
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER fault_audit_entry BEFORE INSERT ON audit
    FOR EACH ROW EXECUTE FUNCTION test_fault('audit_entry');
CREATE TRIGGER fault_audit_settlement BEFORE UPDATE OR DELETE ON audit
    FOR EACH ROW EXECUTE FUNCTION test_fault('audit_settlement');
CREATE TRIGGER fault_job_change BEFORE UPDATE ON jobs
    FOR EACH ROW EXECUTE FUNCTION test_fault('job_change');
CREATE TRIGGER fault_schedule_run_record BEFORE UPDATE OF last_period ON schedules
    FOR EACH ROW WHEN (NEW.last_period IS DISTINCT FROM OLD.last_period)
    EXECUTE FUNCTION test_fault('schedule_run_record');
";

/// A connection to a migrated database with the fault triggers installed.
pub enum DbFaults {
    /// On SQLite.
    Sqlite(SqlitePool),
    /// On PostgreSQL.
    Postgres(PgPool),
}

impl DbFaults {
    /// Installs the triggers on `database` (migrated: a store has opened it), none
    /// armed.
    pub async fn install(database: &Database) -> DbFaults {
        let url = &database.url;
        let faults = if url.starts_with("sqlite:") {
            DbFaults::Sqlite(SqlitePool::connect(url).await.unwrap())
        } else {
            DbFaults::Postgres(PgPool::connect(url).await.unwrap())
        };
        faults
            .run(match faults {
                DbFaults::Sqlite(_) => SQLITE_TRIGGERS,
                DbFaults::Postgres(_) => POSTGRES_TRIGGERS,
            })
            .await;
        faults
    }

    /// Arms `fault`: from now on the database fails as it says.
    pub async fn arm(&self, fault: DbFault) {
        if fault == DbFault::HistoryUnreadable {
            self.run("ALTER TABLE attempts RENAME TO attempts_unreadable")
                .await;
        } else {
            let sql = format!("INSERT INTO test_faults (name) VALUES ('{}')", fault.name());
            self.run(&sql).await;
        }
    }

    /// Disarms `fault` (armed): the database works again.
    pub async fn disarm(&self, fault: DbFault) {
        if fault == DbFault::HistoryUnreadable {
            self.run("ALTER TABLE attempts_unreadable RENAME TO attempts")
                .await;
        } else {
            let sql = format!("DELETE FROM test_faults WHERE name = '{}'", fault.name());
            self.run(&sql).await;
        }
    }

    /// Arms each of `faults`.
    pub async fn arm_all(&self, faults: &[DbFault]) {
        for fault in faults {
            self.arm(*fault).await;
        }
    }

    /// Disarms each of `faults` (armed).
    pub async fn disarm_all(&self, faults: &[DbFault]) {
        for fault in faults {
            self.disarm(*fault).await;
        }
    }

    async fn run(&self, sql: &str) {
        let statements = sqlx::AssertSqlSafe(sql.to_owned());
        match self {
            DbFaults::Sqlite(pool) => sqlx::raw_sql(statements).execute(pool).await.map(drop),
            DbFaults::Postgres(pool) => sqlx::raw_sql(statements).execute(pool).await.map(drop),
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}
