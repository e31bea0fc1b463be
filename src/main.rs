//! `zen`: the zenplus command line.
//!
//! Benchmarks (`bench`, `load`, `run`), pool maintenance (`recover`,
//! `check`, `inspect`), `list`, and `crash-test` (crash campaigns on the
//! simulator). Each subcommand lives in `commands/`;
//! flags are declared in `cli.rs` and resolved into configs in `resolve.rs`.
//! Exit codes are documented in `error.rs` and `zen --help`.

mod cli;
mod commands;
mod error;
mod numa_args;
mod nvm_args;
mod output;
mod resolve;
mod workloads;

use clap::Parser;

/// Counts heap allocations per thread, so that reports can say how many a
/// transaction makes (`zen_pmem::alloc_count`).
#[global_allocator]
static ALLOCATOR: zen_pmem::alloc_count::CountingAllocator =
    zen_pmem::alloc_count::CountingAllocator;

use cli::{Cli, Command};
use error::CliResult;

fn dispatch(cli: &Cli) -> CliResult {
    match &cli.command {
        Command::Bench(args) => commands::bench::bench(args),
        Command::Load(args) => commands::pool::load(args),
        Command::Run(args) => commands::pool::run(args),
        Command::Recover(args) => commands::pool::recover(args),
        Command::Check(args) => commands::pool::check(&args.pool, args.expected_state.as_deref()),
        Command::Inspect(args) => commands::inspect::inspect(args),
        Command::List(args) => commands::list::list(args),
        Command::CrashTest(args) => commands::crash_test::crash_test(args),
        Command::Reproduce(args) => commands::reproduce::reproduce(args),
        Command::Report(args) => commands::reproduce::report(args),
        Command::Plot(args) => {
            commands::plot::plot(&args.results, args.figure.as_deref(), &args.out)
        }
        Command::Probe(args) => commands::probe::probe(args),
    }
}

fn main() {
    // A SIGBUS in a pool's memory (a DAX media error, a pool file truncated
    // under us) becomes an error naming the pool instead of a silent death.
    zen_pmem::sigbus::install(error::FAILED_EXIT_CODE);
    // clap prints usage errors itself and exits with 2 (0 for --help/--version).
    let cli = Cli::parse();
    if let Err(e) = dispatch(&cli) {
        eprintln!("error: {e}");
        std::process::exit(e.exit_code());
    }
}
