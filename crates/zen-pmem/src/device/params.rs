//! The published parameters of a modelled NVM device, one preset per
//! [`NvmProfile`], each field overridable (`zen bench --nvm-<field>`).
//!
//! Latencies are *extra* nanoseconds over this machine's DRAM: the `emu`
//! backend runs on ordinary memory, so a read already pays the machine's own
//! DRAM latency and the model adds the difference between the medium and
//! DRAM. Bandwidths are the device's, in decimal GB/s (10⁹ bytes per second),
//! and are *media* bandwidths: they are charged with the bytes the medium
//! moves after rounding to its access granularity and write combining.
//!
//! Sources (see `docs/design/nvm-emulation.md` for the citations and for
//! which numbers are derived or assumed rather than measured):
//! - `optane`: six interleaved 128 GB Optane DC PMMs on one socket, the Zen
//!   paper's machine (§4). Izraelevitz et al. 2019: random load 305 ns
//!   against 81 ns for DRAM, sequential about twice as fast; six interleaved
//!   DIMMs read 39.4 GB/s and write 13.9 GB/s (per DIMM 6.6 and 2.3 GB/s);
//!   four threads saturate write bandwidth. Yang et al. FAST '20: 256-byte
//!   XPLines, a write-combining XPBuffer of about 16 KB per DIMM, write
//!   bandwidth falling as more threads write.
//! - `cxl`: a CXL Type-3 memory expander (DDR behind a PCIe 5.0 link).
//!   Pond (ASPLOS '23) and Sun et al. (MICRO '23): loads 2-3× local DRAM
//!   latency, no media granularity beyond the cache line.
//! - `dram`: no extra cost at all (the idle-device baseline).

use serde::Serialize;

/// Named presets of [`DeviceParams`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NvmProfile {
    Dram,
    Optane,
    Cxl,
}

impl NvmProfile {
    pub const ALL: [NvmProfile; 3] = [NvmProfile::Dram, NvmProfile::Optane, NvmProfile::Cxl];

    pub fn name(self) -> &'static str {
        match self {
            NvmProfile::Dram => "dram",
            NvmProfile::Optane => "optane",
            NvmProfile::Cxl => "cxl",
        }
    }

    pub fn parse(s: &str) -> Option<NvmProfile> {
        NvmProfile::ALL.into_iter().find(|p| p.name() == s)
    }

    /// The preset's parameters (no sharing).
    pub fn model(self) -> DeviceParams {
        match self {
            NvmProfile::Dram => DeviceParams {
                profile: self,
                read_random_ns: 0,
                read_sequential_ns: 0,
                read_per_line_ns: 0,
                persist_ns: 0,
                read_bandwidth_gb_per_s: None,
                write_bandwidth_gb_per_s: None,
                write_peak_writers: 64,
                write_falloff_per_writer: 0.0,
                write_floor: 1.0,
                media_granularity_bytes: 64,
                combine_lines: 0,
                share_threads: None,
            },
            NvmProfile::Optane => DeviceParams {
                profile: self,
                // 305 ns random load − 81 ns DRAM (Izraelevitz et al.).
                read_random_ns: 224,
                // Sequential loads about 2× faster than random: ≈ 153 − 81.
                read_sequential_ns: 72,
                // 64 B at one DIMM's 6.6 GB/s.
                read_per_line_ns: 10,
                // Carried over from the earlier model: stores are durable at
                // the iMC's write queue (ADR), so a persist costs little more
                // than on DRAM (Yang et al. §2).
                persist_ns: 100,
                read_bandwidth_gb_per_s: Some(39.4),
                write_bandwidth_gb_per_s: Some(13.9),
                write_peak_writers: 4,
                write_falloff_per_writer: 0.03,
                write_floor: 0.6,
                media_granularity_bytes: 256,
                // 16 KB XPBuffer × 6 DIMMs / 256 B / 16 writing threads.
                combine_lines: 24,
                share_threads: None,
            },
            NvmProfile::Cxl => DeviceParams {
                profile: self,
                // ≈ 250 ns loads against ≈ 80 ns local DRAM.
                read_random_ns: 170,
                read_sequential_ns: 170,
                read_per_line_ns: 5,
                persist_ns: 20,
                // A PCIe 5.0 ×8 link (32 GB/s raw per direction) at ~75 %.
                read_bandwidth_gb_per_s: Some(24.0),
                write_bandwidth_gb_per_s: Some(24.0),
                write_peak_writers: 64,
                write_falloff_per_writer: 0.0,
                write_floor: 1.0,
                media_granularity_bytes: 64,
                combine_lines: 0,
                share_threads: None,
            },
        }
    }
}

/// Most write-combining entries a thread may have (a linear scan per flush).
pub const MAX_COMBINE_LINES: u32 = 32;
/// Largest latency a parameter may add (100 µs).
pub const MAX_LATENCY_NS: u64 = 100_000;
/// Largest `--nvm-share`.
pub const MAX_SHARE_THREADS: u32 = 1024;
/// Media access granularity bounds (bytes, powers of two).
pub const MIN_GRANULARITY_BYTES: u64 = 64;
pub const MAX_GRANULARITY_BYTES: u64 = 4096;

/// Everything the device model needs. See the module docs for units.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DeviceParams {
    /// Preset these parameters started from.
    pub profile: NvmProfile,
    /// Extra ns of a read whose first line does not follow the thread's previous read.
    pub read_random_ns: u64,
    /// Extra ns of a read that continues the thread's previous read.
    pub read_sequential_ns: u64,
    /// Extra ns per cache line of one read after the first.
    pub read_per_line_ns: u64,
    /// Extra ns of a fence that follows at least one flush (write latency).
    pub persist_ns: u64,
    /// Media read bandwidth of the device (`None`: unlimited).
    pub read_bandwidth_gb_per_s: Option<f64>,
    /// Peak media write bandwidth of the device (`None`: unlimited).
    pub write_bandwidth_gb_per_s: Option<f64>,
    /// Concurrent writers up to which the write bandwidth holds its peak.
    pub write_peak_writers: u32,
    /// Share of the peak lost per writer beyond `write_peak_writers`.
    pub write_falloff_per_writer: f64,
    /// Least share of the peak write bandwidth, however many writers.
    pub write_floor: f64,
    /// Bytes the medium reads or writes at once (Optane's XPLine: 256).
    pub media_granularity_bytes: u64,
    /// Write-combining entries per thread (granules); 0: none.
    pub combine_lines: u32,
    /// `--nvm-share N`: the running threads each get the bandwidth share of
    /// one of N threads on the device (the paper's regime on a small machine).
    pub share_threads: Option<u32>,
}

/// A parameter out of range; `field` is the parameter's name (the CLI flag
/// is `--nvm-` followed by it with `-` for `_`, see [`ParamError::flag`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid value `{value}` for {}: {expected}", flag_of(.field))]
pub struct ParamError {
    pub field: &'static str,
    pub value: String,
    pub expected: &'static str,
}

fn flag_of(field: &str) -> String {
    format!("--nvm-{}", field.replace('_', "-"))
}

impl ParamError {
    /// The command-line flag that sets the field.
    pub fn flag(&self) -> String {
        flag_of(self.field)
    }
}

fn check(
    ok: bool,
    field: &'static str,
    value: String,
    expected: &'static str,
) -> Result<(), ParamError> {
    if ok { Ok(()) } else { Err(ParamError { field, value, expected }) }
}

fn check_bandwidth(field: &'static str, gb_per_s: Option<f64>) -> Result<(), ParamError> {
    let Some(b) = gb_per_s else { return Ok(()) };
    check(
        b.is_finite() && (1e-3..=1e4).contains(&b),
        field,
        b.to_string(),
        "a bandwidth in GB/s between 0.001 and 10000, or `unlimited`",
    )
}

impl DeviceParams {
    /// Refuse values the model cannot run with.
    pub fn validate(&self) -> Result<(), ParamError> {
        check_bandwidth("read_bw", self.read_bandwidth_gb_per_s)?;
        check_bandwidth("write_bw", self.write_bandwidth_gb_per_s)?;
        let g = self.media_granularity_bytes;
        check(
            g.is_power_of_two() && (MIN_GRANULARITY_BYTES..=MAX_GRANULARITY_BYTES).contains(&g),
            "granularity",
            g.to_string(),
            "a power of two between 64 and 4096 bytes",
        )?;
        check(
            self.combine_lines <= MAX_COMBINE_LINES,
            "combine_lines",
            self.combine_lines.to_string(),
            "0..=32 write-combining entries per thread",
        )?;
        check(
            self.write_peak_writers >= 1,
            "write_peak_writers",
            self.write_peak_writers.to_string(),
            "at least 1 writer",
        )?;
        let f = self.write_falloff_per_writer;
        check(
            f.is_finite() && (0.0..=1.0).contains(&f),
            "write_falloff",
            f.to_string(),
            "a share between 0 and 1",
        )?;
        let floor = self.write_floor;
        check(
            floor.is_finite() && floor > 0.0 && floor <= 1.0,
            "write_floor",
            floor.to_string(),
            "a share above 0 and at most 1",
        )?;
        for (field, ns) in [
            ("read_random_ns", self.read_random_ns),
            ("read_sequential_ns", self.read_sequential_ns),
            ("read_per_line_ns", self.read_per_line_ns),
            ("persist_ns", self.persist_ns),
        ] {
            check(ns <= MAX_LATENCY_NS, field, ns.to_string(), "at most 100000 ns")?;
        }
        if let Some(n) = self.share_threads {
            check(
                (1..=MAX_SHARE_THREADS).contains(&n),
                "share",
                n.to_string(),
                "a thread count between 1 and 1024",
            )?;
        }
        Ok(())
    }

    /// Share of the peak write bandwidth left with `writers` concurrent writers.
    pub fn write_share(&self, writers: u32) -> f64 {
        let beyond = writers.saturating_sub(self.write_peak_writers) as f64;
        (1.0 - beyond * self.write_falloff_per_writer).max(self.write_floor)
    }

    /// Device write bandwidth (GB/s) with `writers` concurrent writers.
    pub fn write_bandwidth_with(&self, writers: u32) -> Option<f64> {
        self.write_bandwidth_gb_per_s.map(|b| b * self.write_share(writers))
    }

    /// Write bandwidth (GB/s) one running thread gets: its 1/N share of the
    /// device under `--nvm-share N`, else the whole device with `writers`.
    pub fn thread_write_bandwidth(&self, writers: u32) -> Option<f64> {
        match self.share_threads {
            Some(n) => self.write_bandwidth_with(n).map(|b| b / f64::from(n)),
            None => self.write_bandwidth_with(writers),
        }
    }

    /// Read bandwidth (GB/s) one running thread gets (see `thread_write_bandwidth`).
    pub fn thread_read_bandwidth(&self) -> Option<f64> {
        match self.share_threads {
            Some(n) => self.read_bandwidth_gb_per_s.map(|b| b / f64::from(n)),
            None => self.read_bandwidth_gb_per_s,
        }
    }

    /// True when nothing is ever charged (the `dram` preset): the backend
    /// skips the model entirely.
    pub fn is_idle(&self) -> bool {
        self.read_random_ns == 0
            && self.read_sequential_ns == 0
            && self.read_per_line_ns == 0
            && self.persist_ns == 0
            && self.read_bandwidth_gb_per_s.is_none()
            && self.write_bandwidth_gb_per_s.is_none()
    }

    /// Latency of an idle random read of `len` bytes at `offset` (no bandwidth wait).
    pub fn read_cost_ns(&self, offset: u64, len: u64) -> u64 {
        if len == 0 {
            return 0;
        }
        let lines = (offset + len - 1) / 64 - offset / 64 + 1;
        self.read_random_ns + (lines - 1) * self.read_per_line_ns
    }

    /// Latency of a fence after `lines` flushed lines (no bandwidth wait).
    pub fn fence_cost_ns(&self, lines: u64) -> u64 {
        if lines == 0 { 0 } else { self.persist_ns }
    }

    /// One line per parameter, for banners and `zen probe`.
    pub fn describe(&self) -> String {
        let bw = |b: Option<f64>| b.map_or("unlimited".to_string(), |b| format!("{b} GB/s"));
        let share = self.share_threads.map_or("none (the device as is)".to_string(), |n| {
            format!("{n} threads (MODEL: each running thread gets 1/{n} of the device)")
        });
        format!(
            "profile {} · read +{} ns random, +{} ns sequential, +{} ns per further line · persist +{} ns · read {} · write {} (peak up to {} writers, −{} per further writer, floor {}) · granularity {} B · write combining {} entries per thread · share {}",
            self.profile.name(),
            self.read_random_ns,
            self.read_sequential_ns,
            self.read_per_line_ns,
            self.persist_ns,
            bw(self.read_bandwidth_gb_per_s),
            bw(self.write_bandwidth_gb_per_s),
            self.write_peak_writers,
            self.write_falloff_per_writer,
            self.write_floor,
            self.media_granularity_bytes,
            self.combine_lines,
            share
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_round_trip_through_their_names() {
        for p in NvmProfile::ALL {
            assert_eq!(NvmProfile::parse(p.name()), Some(p));
            p.model().validate().unwrap();
        }
        assert_eq!(NvmProfile::parse("flash"), None);
    }

    #[test]
    fn optane_random_read_is_305ns_over_81ns_dram() {
        let m = NvmProfile::Optane.model();
        assert_eq!(81 + m.read_cost_ns(0, 8), 305);
        assert_eq!(m.read_cost_ns(60, 8), 234);
        assert_eq!(m.fence_cost_ns(0), 0);
        assert_eq!(m.fence_cost_ns(16), 100);
    }

    #[test]
    fn write_bandwidth_holds_to_the_peak_then_falls_to_the_floor() {
        let m = NvmProfile::Optane.model();
        assert_eq!(m.write_share(1), 1.0);
        assert_eq!(m.write_share(4), 1.0);
        assert!((m.write_share(16) - 0.64).abs() < 1e-9);
        assert_eq!(m.write_share(1000), 0.6);
        let shared = DeviceParams { share_threads: Some(16), ..m };
        let per_thread = shared.thread_write_bandwidth(2).unwrap();
        assert!((per_thread - 13.9 * 0.64 / 16.0).abs() < 1e-9);
        assert!((shared.thread_read_bandwidth().unwrap() - 39.4 / 16.0).abs() < 1e-9);
    }

    #[test]
    fn bad_values_name_their_flag() {
        let m = NvmProfile::Optane.model();
        let e = DeviceParams { write_bandwidth_gb_per_s: Some(0.0), ..m }.validate().unwrap_err();
        assert_eq!(e.flag(), "--nvm-write-bw");
        assert!(e.to_string().contains("--nvm-write-bw"), "{e}");
        let e = DeviceParams { read_bandwidth_gb_per_s: Some(-3.0), ..m }.validate().unwrap_err();
        assert_eq!(e.flag(), "--nvm-read-bw");
        let e = DeviceParams { media_granularity_bytes: 192, ..m }.validate().unwrap_err();
        assert_eq!(e.flag(), "--nvm-granularity");
        let e = DeviceParams { share_threads: Some(0), ..m }.validate().unwrap_err();
        assert_eq!(e.flag(), "--nvm-share");
    }

    #[test]
    fn only_the_dram_preset_is_idle() {
        assert!(NvmProfile::Dram.model().is_idle());
        assert!(!NvmProfile::Optane.model().is_idle());
        assert!(!NvmProfile::Cxl.model().is_idle());
    }
}
