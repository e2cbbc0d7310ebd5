//! What `benches/calibrate.rs` and `benches/calibrate_export.rs` share
//! (each includes this file as a module): the binary's allocator, one
//! large input written once to a temporary folder, a whole calibration
//! (`herdsim calibrate --reps 0 --no-plot`) per sample, and a main that,
//! with an environment variable naming a path, only writes the input
//! there (to time the command line on it).

use criterion::{Criterion, Throughput};
use herdsim::calibrate::{Options, fit::Settings};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// The same allocator as the `herdsim` binary, so the figures match it.
#[global_allocator]
static GLOBAL: herdsim::allocator::Mimalloc = herdsim::allocator::Mimalloc;

/// Bench `calibrate` on the input `write` puts in a temporary folder
/// (`file`; `write` returns its count of `unit`): group `name`, one whole
/// calibration per sample (several seconds), 10 samples.
pub fn bench(
    c: &mut Criterion,
    name: &str,
    file: &str,
    unit: &str,
    write: fn(&Path) -> u64,
    calibrate: fn(&Options, &AtomicBool),
) {
    let tmp = tempfile::tempdir().expect("temporary folder");
    let path = tmp.path().join(file);
    let n = write(&path);
    let mut g = c.benchmark_group(name);
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_secs(60))
        .throughput(Throughput::Elements(n));
    let opts = Options {
        log: path,
        dir: tmp.path().join("out"),
        channel: None,
        settings: Settings::default(),
        reps: 0,
        jobs: 1,
        plots: false,
    };
    let never = AtomicBool::new(false);
    g.bench_function(format!("{unit}_{n}"), |b| {
        b.iter(|| calibrate(&opts, &never))
    });
    g.finish();
}

/// With `env`=PATH, only write the input there (`write` returns its count
/// of `unit`); else run `benches` and Criterion's summary.
pub fn main(env: &str, unit: &str, write: fn(&Path) -> u64, benches: fn()) {
    if let Some(path) = std::env::var_os(env) {
        let n = write(Path::new(&path));
        eprintln!("wrote {} ({n} {unit})", Path::new(&path).display());
        return;
    }
    benches();
    Criterion::default()
        .without_plots()
        .configure_from_args()
        .final_summary();
}
