//! The open-files limit of the load generator: every HTTP/1.1 watcher and
//! every socket of the loopback floor is a file, so the soft limit (often
//! 1024) is raised to the hard limit at start, as watchd does, and a run that
//! cannot fit under the hard limit is refused before it starts rather than
//! failing half-way with `EMFILE`.
//!
//! The hard limit cannot be raised without `CAP_SYS_RESOURCE` (it is 20 000
//! on this project's machines), which is why S1 at 20 000 watchers runs over
//! HTTP/2: 200 connections of 100 streams instead of 20 000 sockets on each
//! side.

/// Files a process needs beside its watch sockets: stdio, the runtime's
/// epoll and wakers, etcd client connections, logs, `/proc` reads.
pub const RESERVE: u64 = 256;

/// The open-files limits of this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The soft limit before [`raise`].
    pub from: u64,
    /// The soft limit now.
    pub soft: u64,
    /// The hard limit (the ceiling of the soft one).
    pub hard: u64,
}

fn get() -> std::io::Result<libc::rlimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(lim)
}

/// Raises the soft open-files limit to the hard limit (children started
/// afterwards inherit it).
pub fn raise() -> std::io::Result<Limits> {
    let mut lim = get()?;
    let from = lim.rlim_cur;
    if lim.rlim_cur < lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: setrlimit only reads the struct passed.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(Limits {
        from,
        soft: lim.rlim_cur,
        hard: lim.rlim_max,
    })
}

/// [`raise`], with one log line saying the limits (or why it failed).
pub fn raise_and_log() {
    match raise() {
        Ok(l) => tracing::info!(
            from = l.from,
            to = l.soft,
            hard = l.hard,
            "open-files limit raised: each HTTP/1.1 watcher and each floor socket holds one"
        ),
        Err(e) => tracing::warn!(error = %e, "cannot raise the open-files limit"),
    }
}

/// The soft open-files limit now (after [`raise`], the hard one).
pub fn soft_limit() -> u64 {
    get().map_or(1024, |l| l.rlim_cur)
}

/// The most sockets one process can hold under a soft limit of `limit`.
pub fn socket_budget(limit: u64) -> u64 {
    limit.saturating_sub(RESERVE)
}

/// `Ok` when `sockets` sockets fit in one process under `limit` open files;
/// otherwise why not, naming `what` needs them.
pub fn check_sockets(sockets: usize, limit: u64, what: &str) -> Result<(), String> {
    let budget = socket_budget(limit);
    if sockets as u64 <= budget {
        return Ok(());
    }
    Err(format!(
        "{what} needs {sockets} sockets in one process, but the open-files limit is {limit} \
         ({budget} after {RESERVE} kept for everything else), and it cannot be raised without \
         privileges: use HTTP/2 (--protocol=http2 or --protocols=http2; e.g. 200 connections x \
         100 streams for 20000 watchers), or fewer watchers"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raising_is_idempotent_and_reaches_the_hard_limit() {
        let first = raise().expect("getrlimit works");
        assert_eq!(first.soft, first.hard);
        let again = raise().expect("still works");
        assert_eq!((again.from, again.soft), (first.hard, first.hard));
        assert_eq!(soft_limit(), first.hard);
    }

    #[test]
    fn sockets_are_checked_against_the_budget() {
        assert_eq!(socket_budget(20_000), 19_744);
        assert_eq!(socket_budget(100), 0);
        assert!(check_sockets(5_000, 20_000, "x").is_ok());
        assert!(check_sockets(19_744, 20_000, "x").is_ok());
        let e = check_sockets(20_000, 20_000, "HTTP/1.1 at 20000 watchers").unwrap_err();
        assert!(e.contains("HTTP/1.1 at 20000 watchers needs 20000"), "{e}");
        assert!(e.contains("HTTP/2"), "{e}");
    }
}
