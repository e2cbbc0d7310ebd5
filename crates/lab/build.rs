//! Build identity: a hash of everything that decides what a simulation
//! computes (the simulation source under the workspace's `src/` and
//! `crates/`, `Cargo.lock`, the compiler and the target), as
//! `HERDSIM_BUILD`, for `sweep` (this crate) and `herdsim::BUILD`. Journals and shard
//! results record it, and `run --resume` and `merge` refuse results of
//! another build, so two builds' replications never mix in one table.
//!
//! Left out, because they cannot change a result: the plotting, tuning,
//! `arbitrate` and `validate` front ends and test-only files. Anything
//! unreadable is skipped (a build from a packaged crate without
//! `Cargo.lock` still gets an identity, from what there is).

use std::path::{Path, PathBuf};

/// Paths under `src/` and `crates/` (prefixes, `/`-separated, from the
/// workspace root) that cannot change a run's numbers.
const NOT_SIMULATION: [&str; 10] = [
    "crates/report/src/report/plot/",
    "crates/lab/src/tune/",
    "crates/lab/src/calibrate/",
    "crates/net/src/observe/",
    "src/cli/plot.rs",
    "src/cli/tune.rs",
    "src/cli/arbitrate.rs",
    "src/cli/validate.rs",
    "src/cli/calibrate.rs",
    "src/cli/observe.rs",
];

/// FNV-1a, 64 bits, with length-prefixed parts (as `sweep::Fnv`).
struct Fnv(u64);

impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    fn part(&mut self, bytes: &[u8]) {
        self.write(&(bytes.len() as u64).to_le_bytes());
        self.write(bytes);
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn main() {
    // This crate is crates/lab: the workspace root is two folders up.
    println!("cargo:rerun-if-changed=../../src");
    println!("cargo:rerun-if-changed=../../crates");
    println!("cargo:rerun-if-changed=../../Cargo.lock");
    println!("cargo:rerun-if-changed=build.rs");
    let here = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| ".".into()));
    let root = here.join("../..");
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    // The workspace's crates (the model, the floor, the engine, ...).
    rust_files(&root.join("crates"), &mut files);
    let mut named: Vec<(String, PathBuf)> = files
        .into_iter()
        .filter_map(|p| {
            let rel = p
                .strip_prefix(&root)
                .ok()?
                .to_string_lossy()
                .replace('\\', "/");
            let skip = NOT_SIMULATION.iter().any(|x| rel.starts_with(x))
                || rel.ends_with("tests.rs")
                || rel.ends_with("/proptests.rs");
            (!skip).then_some((rel, p))
        })
        .collect();
    named.sort();
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    for (rel, p) in &named {
        if let Ok(bytes) = std::fs::read(p) {
            h.part(rel.as_bytes());
            h.part(&bytes);
        }
    }
    if let Ok(lock) = std::fs::read(root.join("Cargo.lock")) {
        h.part(b"Cargo.lock");
        h.part(&lock);
    }
    // The compiler and target decide float formatting and libm.
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    if let Ok(out) = std::process::Command::new(rustc).arg("-vV").output() {
        h.part(&out.stdout);
    }
    h.part(std::env::var("TARGET").unwrap_or_default().as_bytes());
    println!("cargo:rustc-env=HERDSIM_BUILD={:016x}", h.0);
}
