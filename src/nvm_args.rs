//! The NVM device-model flags of `--pmem emu` (`--nvm-share`, `--nvm-*`
//! overrides of the profile's parameters) and their mapping to
//! `zen_pmem::DeviceParams`. Every refusal names the flag: a value out of
//! range (`DeviceParams::validate`), an override or `--nvm-share` with a
//! backend that models nothing.

use clap::Args;
use zen_pmem::{BackendKind, DeviceParams, NvmProfile};

use crate::error::{CliError, CliResult};

/// Overrides of the `--nvm-profile` preset (docs/design/nvm-emulation.md).
#[derive(Debug, Clone, Default, Args)]
pub struct NvmArgs {
    /// MODEL of a bigger machine: each running thread gets the bandwidth share one of N threads would have on the device (1/N of its bandwidth with N writers), e.g. 16 for the Zen paper's 16 threads. --pmem emu only.
    #[arg(long, value_name = "N")]
    pub nvm_share: Option<u32>,
    /// Extra ns of a random NVM read over DRAM (optane 224: 305 − 81 ns).
    #[arg(long, value_name = "NS", allow_negative_numbers = true)]
    pub nvm_read_random_ns: Option<i64>,
    /// Extra ns of a read continuing the thread's previous one (optane 72).
    #[arg(long, value_name = "NS", allow_negative_numbers = true)]
    pub nvm_read_sequential_ns: Option<i64>,
    /// Extra ns per further cache line of one read (optane 10).
    #[arg(long, value_name = "NS", allow_negative_numbers = true)]
    pub nvm_read_per_line_ns: Option<i64>,
    /// Extra ns of a fence after flushes: the write (persist) latency (optane 100).
    #[arg(long, value_name = "NS", allow_negative_numbers = true)]
    pub nvm_persist_ns: Option<i64>,
    /// Device media read bandwidth in GB/s, or `unlimited` (optane 39.4: six DIMMs).
    #[arg(long, value_name = "GB/S", allow_negative_numbers = true)]
    pub nvm_read_bw: Option<String>,
    /// Device peak media write bandwidth in GB/s, or `unlimited` (optane 13.9: six DIMMs).
    #[arg(long, value_name = "GB/S", allow_negative_numbers = true)]
    pub nvm_write_bw: Option<String>,
    /// Concurrent writers up to which write bandwidth holds its peak (optane 4).
    #[arg(long, value_name = "N")]
    pub nvm_write_peak_writers: Option<u32>,
    /// Share of peak write bandwidth lost per writer beyond the peak (optane 0.03).
    #[arg(long, value_name = "SHARE", allow_negative_numbers = true)]
    pub nvm_write_falloff: Option<f64>,
    /// Least share of peak write bandwidth however many writers (optane 0.6).
    #[arg(long, value_name = "SHARE", allow_negative_numbers = true)]
    pub nvm_write_floor: Option<f64>,
    /// Media access granularity in bytes, a power of two 64..=4096 (optane 256: the XPLine).
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true)]
    pub nvm_granularity: Option<i64>,
    /// Write-combining entries (granules) per thread, 0..=32 (optane 24).
    #[arg(long, value_name = "N")]
    pub nvm_combine_lines: Option<u32>,
}

impl NvmArgs {
    /// The flags given, for the "applies to --pmem emu only" refusal.
    fn given(&self) -> Vec<&'static str> {
        let mut given = Vec::new();
        let mut note = |set: bool, flag| {
            if set {
                given.push(flag);
            }
        };
        note(self.nvm_share.is_some(), "--nvm-share");
        note(self.nvm_read_random_ns.is_some(), "--nvm-read-random-ns");
        note(self.nvm_read_sequential_ns.is_some(), "--nvm-read-sequential-ns");
        note(self.nvm_read_per_line_ns.is_some(), "--nvm-read-per-line-ns");
        note(self.nvm_persist_ns.is_some(), "--nvm-persist-ns");
        note(self.nvm_read_bw.is_some(), "--nvm-read-bw");
        note(self.nvm_write_bw.is_some(), "--nvm-write-bw");
        note(self.nvm_write_peak_writers.is_some(), "--nvm-write-peak-writers");
        note(self.nvm_write_falloff.is_some(), "--nvm-write-falloff");
        note(self.nvm_write_floor.is_some(), "--nvm-write-floor");
        note(self.nvm_granularity.is_some(), "--nvm-granularity");
        note(self.nvm_combine_lines.is_some(), "--nvm-combine-lines");
        given
    }
}

fn bad(flag: &str, value: &str, allowed: &str) -> CliError {
    CliError::usage(format!("invalid value `{value}` for {flag}: {allowed}"))
}

fn nanoseconds(flag: &str, value: Option<i64>, preset: u64) -> CliResult<u64> {
    match value {
        None => Ok(preset),
        Some(ns) => {
            u64::try_from(ns).map_err(|_| bad(flag, &ns.to_string(), "a latency of at least 0 ns"))
        }
    }
}

fn bandwidth(flag: &str, value: Option<&str>, preset: Option<f64>) -> CliResult<Option<f64>> {
    let allowed = "a bandwidth in GB/s above 0 (e.g. 13.9), or `unlimited`";
    match value {
        None => Ok(preset),
        Some("unlimited") => Ok(None),
        Some(text) => match text.trim().parse::<f64>() {
            Ok(b) if b.is_finite() && b > 0.0 => Ok(Some(b)),
            _ => Err(bad(flag, text, allowed)),
        },
    }
}

/// The device parameters of `--nvm-profile` (default optane) with the
/// overrides applied, refused unless `pmem` is `emu` (or, for the real
/// device's `zen probe`, when nothing is overridden).
pub fn device_params(
    args: &NvmArgs,
    profile: NvmProfile,
    pmem: BackendKind,
) -> CliResult<DeviceParams> {
    let given = args.given();
    if pmem != BackendKind::Emu && !given.is_empty() {
        return Err(CliError::usage(format!(
            "{} applies to --pmem emu only (the device model); --pmem {} runs at the medium's own speed",
            given.join(", "),
            pmem.name()
        )));
    }
    let p = profile.model();
    let params = DeviceParams {
        profile,
        read_random_ns: nanoseconds(
            "--nvm-read-random-ns",
            args.nvm_read_random_ns,
            p.read_random_ns,
        )?,
        read_sequential_ns: nanoseconds(
            "--nvm-read-sequential-ns",
            args.nvm_read_sequential_ns,
            p.read_sequential_ns,
        )?,
        read_per_line_ns: nanoseconds(
            "--nvm-read-per-line-ns",
            args.nvm_read_per_line_ns,
            p.read_per_line_ns,
        )?,
        persist_ns: nanoseconds("--nvm-persist-ns", args.nvm_persist_ns, p.persist_ns)?,
        read_bandwidth_gb_per_s: bandwidth(
            "--nvm-read-bw",
            args.nvm_read_bw.as_deref(),
            p.read_bandwidth_gb_per_s,
        )?,
        write_bandwidth_gb_per_s: bandwidth(
            "--nvm-write-bw",
            args.nvm_write_bw.as_deref(),
            p.write_bandwidth_gb_per_s,
        )?,
        write_peak_writers: args.nvm_write_peak_writers.unwrap_or(p.write_peak_writers),
        write_falloff_per_writer: args.nvm_write_falloff.unwrap_or(p.write_falloff_per_writer),
        write_floor: args.nvm_write_floor.unwrap_or(p.write_floor),
        media_granularity_bytes: match args.nvm_granularity {
            None => p.media_granularity_bytes,
            Some(g) => u64::try_from(g).map_err(|_| {
                bad("--nvm-granularity", &g.to_string(), "a power of two between 64 and 4096 bytes")
            })?,
        },
        combine_lines: args.nvm_combine_lines.unwrap_or(p.combine_lines),
        share_threads: args.nvm_share,
    };
    params.validate().map_err(|e| CliError::usage(e.to_string()))?;
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(args: NvmArgs, pmem: BackendKind) -> String {
        device_params(&args, NvmProfile::Optane, pmem).unwrap_err().to_string()
    }

    #[test]
    fn overrides_replace_the_preset_fields() {
        let args = NvmArgs {
            nvm_share: Some(16),
            nvm_write_bw: Some("2.3".into()),
            nvm_read_bw: Some("unlimited".into()),
            nvm_granularity: Some(128),
            ..NvmArgs::default()
        };
        let p = device_params(&args, NvmProfile::Optane, BackendKind::Emu).unwrap();
        assert_eq!(p.write_bandwidth_gb_per_s, Some(2.3));
        assert_eq!(p.read_bandwidth_gb_per_s, None);
        assert_eq!((p.media_granularity_bytes, p.share_threads), (128, Some(16)));
        assert_eq!(p.read_random_ns, 224);
    }

    #[test]
    fn bad_values_are_refused_naming_their_flag() {
        let bw = |v: &str| NvmArgs { nvm_write_bw: Some(v.into()), ..NvmArgs::default() };
        assert!(refusal(bw("0"), BackendKind::Emu).contains("--nvm-write-bw"));
        assert!(refusal(bw("-2"), BackendKind::Emu).contains("--nvm-write-bw"));
        assert!(refusal(bw("fast"), BackendKind::Emu).contains("--nvm-write-bw"));
        let read = NvmArgs { nvm_read_bw: Some("0".into()), ..NvmArgs::default() };
        assert!(refusal(read, BackendKind::Emu).contains("--nvm-read-bw"));
        let g = NvmArgs { nvm_granularity: Some(100), ..NvmArgs::default() };
        assert!(refusal(g, BackendKind::Emu).contains("--nvm-granularity"));
        let share = NvmArgs { nvm_share: Some(0), ..NvmArgs::default() };
        assert!(refusal(share, BackendKind::Emu).contains("--nvm-share"));
        let ns = NvmArgs { nvm_persist_ns: Some(-1), ..NvmArgs::default() };
        assert!(refusal(ns, BackendKind::Emu).contains("--nvm-persist-ns"));
    }

    #[test]
    fn model_flags_are_refused_off_emu() {
        let share = NvmArgs { nvm_share: Some(16), ..NvmArgs::default() };
        let err = refusal(share, BackendKind::Fs);
        assert!(err.contains("--nvm-share") && err.contains("--pmem emu only"), "{err}");
        assert!(device_params(&NvmArgs::default(), NvmProfile::Optane, BackendKind::Fs).is_ok());
    }
}
