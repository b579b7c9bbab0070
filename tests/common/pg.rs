//! A fresh PostgreSQL database per test, on the server that
//! `DEFERHOOK_TEST_POSTGRES_URL` names (default `postgres://postgres@127.0.0.1:5432/postgres`,
//! the database it connects to for `CREATE DATABASE`). When no server answers, the test
//! is skipped with one line on standard error, except under `CI=true`, where that is a
//! failure.

use std::io::Write;
use std::time::Duration;

use sqlx::Connection;
use sqlx::postgres::PgConnection;

/// The server's administrative URL.
pub fn admin_url() -> String {
    std::env::var("DEFERHOOK_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// True when the server answers; otherwise says so once (a skip), or panics under
/// `CI=true`. Cached for the whole test binary.
pub async fn reachable() -> bool {
    static REACHABLE: tokio::sync::OnceCell<bool> = tokio::sync::OnceCell::const_new();
    *REACHABLE
        .get_or_init(|| async {
            let connected =
                tokio::time::timeout(Duration::from_secs(5), PgConnection::connect(&admin_url()))
                    .await;
            match connected {
                Ok(Ok(connection)) => {
                    let _ = connection.close().await;
                    true
                }
                Ok(Err(error)) => unreachable_server(&error.to_string()),
                Err(_) => unreachable_server("timed out"),
            }
        })
        .await
}

fn unreachable_server(why: &str) -> bool {
    let message = format!(
        "PostgreSQL is not reachable at DEFERHOOK_TEST_POSTGRES_URL ({why}); \
         its tests are skipped: start it or set the variable"
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{message}");
    }
    // Straight to the process's stderr: libtest captures eprintln! of passing tests.
    let _ = writeln!(
        std::io::stderr(),
        "skipping the PostgreSQL tests: {message}"
    );
    false
}

/// A database created for one test and dropped when this is dropped.
pub struct TestDatabase {
    /// Its URL.
    pub url: String,
    name: String,
}

impl TestDatabase {
    /// Creates `deferhook_test_<random>`; `None` (after one line saying why) when no
    /// PostgreSQL server answers and `CI` is not `true`.
    pub async fn create() -> Option<TestDatabase> {
        Self::create_with("").await
    }

    /// [`TestDatabase::create`] with `options` after `CREATE DATABASE name` (e.g. a
    /// locale).
    pub async fn create_with(options: &str) -> Option<TestDatabase> {
        if !reachable().await {
            return None;
        }
        let admin = admin_url();
        let mut connection = PgConnection::connect(&admin)
            .await
            .expect("connect to PostgreSQL");
        let name = format!("deferhook_test_{}", uuid::Uuid::new_v4().simple());
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "CREATE DATABASE {name} {options}"
        )))
        .execute(&mut connection)
        .await
        .expect("CREATE DATABASE");
        let _ = connection.close().await;
        let base = admin
            .rsplit_once('/')
            .map_or(admin.as_str(), |(base, _)| base);
        Some(TestDatabase {
            url: format!("{base}/{name}"),
            name,
        })
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let name = self.name.clone();
        // Drop runs outside async code; use a runtime of its own on another thread.
        let _ = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async move {
                if let Ok(mut connection) = PgConnection::connect(&admin_url()).await {
                    let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                    let _ = sqlx::query(sqlx::AssertSqlSafe(sql))
                        .execute(&mut connection)
                        .await;
                }
            });
        })
        .join();
    }
}
