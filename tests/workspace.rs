//! The workspace's crates stay what docs/architecture.md says they are:
//! `herdsim-floor` pulls no runtime, network, plotting, CLI or randomness
//! crate (an embedder gets the arbitration alone), and `herdsim-engine`
//! depends on nothing. Read from `cargo tree`, which resolves exactly what
//! a build of that crate alone compiles.

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

#[test]
fn the_floor_pulls_no_runtime_network_plotting_cli_or_randomness() {
    let deps = tree("herdsim-floor");
    assert!(deps.iter().any(|d| d == "serde_json"), "{deps:?}");
    for banned in [
        "tokio",
        "rustls",
        "tungstenite",
        "plotters",
        "clap",
        "rand",
        "herdsim",
    ] {
        assert!(
            !deps.iter().any(|d| d == banned
                || d.starts_with(&format!("{banned}_"))
                || d.starts_with(&format!("{banned}-"))),
            "herdsim-floor depends on {banned}: {deps:?}"
        );
    }
}

#[test]
fn the_engine_depends_on_nothing() {
    assert_eq!(tree("herdsim-engine"), Vec::<String>::new());
}
