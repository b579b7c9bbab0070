//! Rebuilds when a migration is added or changed: `sqlx::migrate!` embeds the files of
//! `migrations/` at compile time, and Cargo does not watch a directory it was not told
//! of (the build script `sqlx migrate build-script` writes).

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
