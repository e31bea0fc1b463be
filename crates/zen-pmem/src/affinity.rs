//! Thread pinning: bind the calling thread to one CPU (`sched_setaffinity`).
//!
//! Zen+ binds each worker to a CPU of its NUMA node (§4.2.2) so that the
//! memory it writes stays local. The engine decides which CPU; this module
//! only performs the system call, which is `unsafe` in libc and therefore
//! lives in `zen-pmem` with the crate's other unsafe sites (`UNSAFE.md`).

use std::io;

/// Most CPU numbers a `cpu_set_t` can name (1024 on Linux).
pub const MAX_CPU: usize = libc::CPU_SETSIZE as usize;

/// Pin the calling thread to `cpu`. Errors: the CPU number is too large, or
/// the kernel refuses (offline CPU, or one outside the process's cpuset).
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    if cpu >= MAX_CPU {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cpu {cpu} is beyond the {MAX_CPU} a cpu set can name"),
        ));
    }
    // `cpu_set_t` is a plain bit array for which all-zero is a valid (empty)
    // value; CPU_SET writes one bit inside it (cpu < CPU_SETSIZE was checked
    // above); sched_setaffinity reads `size_of::<cpu_set_t>()` bytes from a
    // pointer to that local value, and pid 0 means the calling thread.
    // SAFETY: every pointer is to the local set, every index inside it.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &raw const set)
    };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// The CPUs the calling thread may run on.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // As above, an all-zero `cpu_set_t` is valid; sched_getaffinity writes at
    // most `size_of::<cpu_set_t>()` bytes into the local value, and CPU_ISSET
    // reads bits below CPU_SETSIZE only.
    // SAFETY: every pointer is to the local set, every index inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &raw mut set) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((0..MAX_CPU).filter(|&c| libc::CPU_ISSET(c, &set)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_pinned_to_an_allowed_cpu_runs_only_there() {
        let allowed = allowed_cpus().unwrap();
        assert!(!allowed.is_empty());
        let cpu = *allowed.last().unwrap();
        std::thread::spawn(move || {
            pin_current_thread(cpu).unwrap();
            assert_eq!(allowed_cpus().unwrap(), vec![cpu]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_cpu_beyond_the_set_is_refused() {
        let err = pin_current_thread(MAX_CPU).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}
