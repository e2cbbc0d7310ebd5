//! The workspace's crates stay what docs/architecture.md says they are,
//! read from `cargo tree`, which resolves exactly what a build of that
//! crate alone compiles:
//!
//! - `herdsim-floor` pulls no runtime, network, plotting, CLI or
//!   randomness crate (an embedder gets the arbitration alone);
//! - `herdsim-engine` depends on nothing;
//! - `herdsim-model` (what a simulated run needs) no runtime, TLS,
//!   plotting or CLI crate;
//! - `herdsim-report` no runtime and no CLI crate;
//! - `herdsim-lab` (sweep, tune, calibrate) no runtime, TLS or CLI crate,
//!   and not the network face above it.
//!
//! Cargo itself keeps the order of the crates (an import back up would be
//! a dependency cycle, which does not build); these tests keep the heavy
//! crates out of the layers that must not need them.

use std::process::Command;

/// The crates `cargo tree -p krate` lists under normal dependencies, by
/// name (the first line, the crate itself, left out).
fn tree(krate: &str) -> Vec<String> {
    let out = Command::new(env!("CARGO"))
        .args(["tree", "--offline", "--edges", "normal", "--prefix", "none"])
        .args(["--format", "{p}", "-p", krate])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree -p {krate}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// Fails naming `krate` and the first of `banned` it depends on: a
/// crate named `banned`, or `banned_...` / `banned-...` (`tokio-rustls`,
/// `rand_core`).
fn assert_free_of(krate: &str, banned: &[&str]) -> Vec<String> {
    let deps = tree(krate);
    for banned in banned {
        assert!(
            !deps.iter().any(|d| d == banned
                || d.starts_with(&format!("{banned}_"))
                || d.starts_with(&format!("{banned}-"))),
            "{krate} depends on {banned}: {deps:?}"
        );
    }
    deps
}

#[test]
fn the_floor_pulls_no_runtime_network_plotting_cli_or_randomness() {
    let deps = assert_free_of(
        "herdsim-floor",
        &[
            "tokio",
            "rustls",
            "tungstenite",
            "plotters",
            "clap",
            "rand",
            "herdsim",
        ],
    );
    assert!(deps.iter().any(|d| d == "serde_json"), "{deps:?}");
}

#[test]
fn the_engine_depends_on_nothing() {
    assert_eq!(tree("herdsim-engine"), Vec::<String>::new());
}

#[test]
fn the_model_pulls_no_runtime_tls_plotting_or_cli() {
    let deps = assert_free_of(
        "herdsim-model",
        &[
            "tokio",
            "rustls",
            "tungstenite",
            "plotters",
            "image",
            "clap",
            "rayon",
            "herdsim-report",
            "herdsim-lab",
            "herdsim-net",
        ],
    );
    // It is the layer on the floor and the engine.
    for d in ["herdsim-floor", "herdsim-engine"] {
        assert!(deps.iter().any(|x| x == d), "{deps:?}");
    }
}

#[test]
fn the_reports_pull_no_runtime_or_cli() {
    let deps = assert_free_of(
        "herdsim-report",
        &["tokio", "rustls", "clap", "herdsim-lab", "herdsim-net"],
    );
    assert!(deps.iter().any(|d| d == "plotters"), "{deps:?}");
}

#[test]
fn the_lab_pulls_no_runtime_tls_or_cli() {
    assert_free_of(
        "herdsim-lab",
        &["tokio", "rustls", "tungstenite", "clap", "herdsim-net"],
    );
}
