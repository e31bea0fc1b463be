//! Thread pinning and memory binding: bind the calling thread to one CPU
//! (`sched_setaffinity`) and a range of memory to one NUMA node (`mbind`).
//!
//! Zen+ binds each worker to a CPU of its NUMA node (§4.2.2) so that the
//! memory it writes stays local, and homes the worker's DRAM cache region
//! on that node. The engine decides which CPU and which node; this module
//! only performs the system calls, which are `unsafe` in libc and therefore
//! live in `zen-pmem` with the crate's other unsafe sites (`UNSAFE.md`).

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

/// Most NUMA node numbers a node mask here can name.
pub const MAX_NODE: usize = 1024;
/// `mbind` flag: move pages already placed on another node (linux/mempolicy.h).
const MPOL_MF_MOVE: libc::c_ulong = 1 << 1;

/// How [`bind_memory`] places pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryPolicy {
    /// `MPOL_PREFERRED`: on the node while it has free memory, elsewhere
    /// after that (never fails an allocation).
    Preferred,
    /// `MPOL_BIND`: only on the node (an allocation the node cannot serve fails).
    Bind,
}

impl MemoryPolicy {
    pub fn name(self) -> &'static str {
        match self {
            MemoryPolicy::Preferred => "preferred",
            MemoryPolicy::Bind => "bind",
        }
    }
}

/// Bind the whole pages inside `memory` to NUMA node `node` (the kernel's
/// node number) with `policy`, moving those already placed elsewhere
/// (`MPOL_MF_MOVE`). Returns the bytes bound: the range rounded inwards to
/// whole pages, so 0 for a range that holds no whole page (nothing shared
/// with a neighbouring allocation is ever rebound). Errors are the
/// kernel's (`ENOSYS` without NUMA support, `EPERM` in a restricted
/// container, `EINVAL` for a node that does not exist).
pub fn bind_memory<T>(memory: &[T], node: usize, policy: MemoryPolicy) -> io::Result<usize> {
    if node >= MAX_NODE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("node {node} is beyond the {MAX_NODE} a node mask can name"),
        ));
    }
    let page = page_size();
    let start = (memory.as_ptr() as usize).div_ceil(page) * page;
    let end = (memory.as_ptr() as usize + std::mem::size_of_val(memory)) / page * page;
    if end <= start {
        return Ok(0);
    }
    let mut mask = [0 as libc::c_ulong; MAX_NODE / libc::c_ulong::BITS as usize];
    mask[node / libc::c_ulong::BITS as usize] |= 1 << (node % libc::c_ulong::BITS as usize);
    let mode = match policy {
        MemoryPolicy::Preferred => libc::MPOL_PREFERRED,
        MemoryPolicy::Bind => libc::MPOL_BIND,
    };
    // The kernel reads `maxnode - 1` bits of the mask (mbind(2)), hence the
    // `+ 1`; the mask is a local array of exactly that many bits. The range
    // `start..end` is whole pages inside `memory`, a live allocation the
    // caller borrows: mbind changes where those pages live (migrating them
    // with their contents), never what they hold or who may access them.
    // SAFETY: every pointer is to the local mask or inside `memory`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            start as *mut libc::c_void,
            (end - start) as libc::c_ulong,
            mode as libc::c_ulong,
            mask.as_ptr(),
            (MAX_NODE + 1) as libc::c_ulong,
            MPOL_MF_MOVE,
        )
    };
    if rc == 0 { Ok(end - start) } else { Err(io::Error::last_os_error()) }
}

fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the running system.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).ok().filter(|s| s.is_power_of_two()).unwrap_or(4096)
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
    fn memory_binds_to_node_0_with_either_policy() {
        // Every Linux machine has a node 0, so binding to it must succeed
        // (this one-node machine included) and cover the whole pages inside.
        let memory = vec![7u64; 1 << 17];
        for policy in [MemoryPolicy::Preferred, MemoryPolicy::Bind] {
            let bound = bind_memory(&memory, 0, policy).unwrap();
            assert!(((1 << 20) - 2 * 4096..=1 << 20).contains(&bound), "{bound}");
        }
        assert!(memory.iter().all(|&w| w == 7), "binding changed the contents");
    }

    #[test]
    fn binding_less_than_a_page_or_to_an_absent_node_binds_nothing() {
        let small = [1u8; 100];
        assert_eq!(bind_memory(&small, 0, MemoryPolicy::Bind).unwrap(), 0);
        assert_eq!(
            bind_memory(&small, MAX_NODE, MemoryPolicy::Bind).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        let memory = vec![0u64; 1 << 16];
        assert!(bind_memory(&memory, MAX_NODE - 1, MemoryPolicy::Bind).is_err());
    }

    #[test]
    fn a_cpu_beyond_the_set_is_refused() {
        let err = pin_current_thread(MAX_CPU).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}
