//! The CPU time PostgreSQL spends, for the figure "database CPU per delivered job".
//!
//! PostgreSQL runs one process per connection under its postmaster, so its CPU is the
//! sum over every `postgres` process on this machine (`utime + stime` from
//! `/proc/<pid>/stat`), plus what the postmaster's reaped children used (`cutime +
//! cstime` of the postmaster: backends that exited during the run). The difference of
//! two readings is what the server spent between them, counting every client's work:
//! the benchmark is the only client of the machine's PostgreSQL while it runs.

/// One process's CPU counters from `/proc/<pid>/stat`, in clock ticks.
struct Ticks {
    parent: u32,
    own: u64,
    reaped_children: u64,
}

/// The CPU seconds used so far by every PostgreSQL process on this machine (live ones,
/// and the exited backends their postmaster reaped); an error when `/proc` cannot be
/// read or no `postgres` process runs.
pub fn postgres_cpu_seconds() -> anyhow::Result<f64> {
    let mut postgres = std::collections::HashMap::new();
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // A process may exit between the listing and the read: skip it.
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some(ticks) = parse(&stat).filter(|_| command(&stat) == Some("postgres")) {
            postgres.insert(pid, ticks);
        }
    }
    anyhow::ensure!(!postgres.is_empty(), "no postgres process on this machine");
    let total: u64 = postgres
        .values()
        .map(|t| {
            // The postmaster's parent is not a postgres process; its reaped children
            // are exited backends. A backend's own children are none.
            let postmaster = !postgres.contains_key(&t.parent);
            t.own + if postmaster { t.reaped_children } else { 0 }
        })
        .sum();
    Ok(total as f64 / super::server::clock_ticks_per_second())
}

/// The command name of a `/proc/<pid>/stat` line (in parentheses).
fn command(stat: &str) -> Option<&str> {
    let start = stat.find('(')? + 1;
    let end = stat.rfind(')')?;
    stat.get(start..end)
}

/// The parent pid (field 4), `utime + stime` (14, 15) and `cutime + cstime` (16, 17).
fn parse(stat: &str) -> Option<Ticks> {
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let at = |n: usize| -> Option<u64> { fields.get(n)?.parse().ok() };
    Some(Ticks {
        parent: u32::try_from(at(1)?).ok()?,
        own: at(11)? + at(12)?,
        reaped_children: at(13)? + at(14)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_its_parent_and_ticks() {
        let line = "4242 (postgres) S 1 4242 4242 0 -1 4194560 5 0 0 0 30 12 7 3 20 0 1 0";
        let ticks = parse(line).unwrap();
        assert_eq!(command(line), Some("postgres"));
        assert_eq!(
            (ticks.parent, ticks.own, ticks.reaped_children),
            (1, 42, 10)
        );
        let odd = "7 (post gres) (x)) R 3 0 0 0 -1 0 0 0 0 0 1 2 3 4";
        assert_eq!(command(odd), Some("post gres) (x)"));
        assert_eq!(parse(odd).unwrap().own, 3);
    }
}
