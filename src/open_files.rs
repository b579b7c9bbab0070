//! The open-files limit (`RLIMIT_NOFILE`): every attempt in flight holds a socket, so a
//! worker with N slots needs N descriptors plus room for the API's connections and the
//! database pool. Many systems start processes with a soft limit of 1,024; the server
//! raises its soft limit toward the hard one at start, as network servers commonly do
//! (getrlimit(2)/setrlimit(2)): to `--max-in-flight` plus [`RESERVED`] when given, else
//! to the hard limit, which then bounds the default slot count
//! ([`WorkerSlots`](crate::delivery::slots::WorkerSlots)).

/// Descriptors kept for everything but attempts: API connections, the database pool,
/// listeners, log files.
pub const RESERVED: u64 = 1_024;

/// What [`raise_to`] found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFiles {
    /// The soft limit before.
    pub before: u64,
    /// The soft limit now.
    pub now: u64,
    /// The hard limit (the most an unprivileged process may set).
    pub hard: u64,
}

/// Raises the soft open-files limit to at least `wanted` (never above the hard limit,
/// never lowering it).
///
/// # Errors
/// The OS error of `getrlimit`/`setrlimit`.
// `rlim_t` is u64 on Linux but not on every platform, hence the casts.
#[allow(clippy::unnecessary_cast)]
pub fn raise_to(wanted: u64) -> std::io::Result<OpenFiles> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit for the call's duration.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let (before, hard) = (limit.rlim_cur as u64, limit.rlim_max as u64);
    let target = wanted.min(hard);
    if target <= before {
        return Ok(OpenFiles {
            before,
            now: before,
            hard,
        });
    }
    limit.rlim_cur = target as libc::rlim_t;
    // SAFETY: `limit` is a valid rlimit with rlim_cur <= rlim_max.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(OpenFiles {
        before,
        now: target,
        hard,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_lowers_and_never_passes_the_hard_limit() {
        let first = raise_to(0).unwrap();
        assert_eq!(first.now, first.before, "asking for less changes nothing");
        let raised = raise_to(u64::MAX).unwrap();
        assert_eq!(raised.now, raised.hard, "capped at the hard limit");
        assert!(raised.now >= first.before);
    }
}
