//! Both backends carry the same migrations: the same version numbers and names.

use std::path::Path;

fn listing(backend: &str) -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(backend);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn sqlite_and_postgres_migrations_match() {
    let sqlite = listing("sqlite");
    let postgres = listing("postgres");
    assert!(!sqlite.is_empty());
    assert_eq!(
        sqlite, postgres,
        "migrations/sqlite and migrations/postgres differ"
    );
    for name in &sqlite {
        let (version, rest) = name.split_once('_').expect("VERSION_name.sql");
        assert!(version.chars().all(|c| c.is_ascii_digit()), "{name}");
        assert!(rest.ends_with(".sql"), "{name}");
    }
}
