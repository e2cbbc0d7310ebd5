//! The Python package's tests (python/tests, pytest), run by the README's
//! test command: a virtual environment in the target folder gets the test
//! tools and the package, installed from the repo's python/ folder by pip
//! (maturin builds the extension with cargo, into a target folder of its
//! own beside this build's, so the two builds never wait on each other's
//! lock), then pytest runs against it, comparing with the `herdsim` binary
//! cargo built for these tests.
//!
//! It needs `python3` (3.9 or later, with `venv`) and PyPI (pip fetches
//! maturin, pytest, hypothesis, pandas, matplotlib, websockets, aiohttp and
//! matrix-synapse the first time; websockets is for the example gateway
//! agent, python/examples/floor_agent.py, which python/tests/test_gateway.py
//! runs against `herdsim serve`; aiohttp and matrix-synapse are for the
//! Matrix agent, python/examples/matrix_agent.py, which
//! python/tests/test_matrix.py runs against a Synapse it starts on
//! loopback, with `HERDSIM_MATRIX=required` so that a missing Synapse
//! fails the run instead of skipping the test; python/tests/test_matrix_live.py
//! runs `herdsim live --compare` there through python/examples/matrix_bridge.py).
//! The environment is kept between runs (`target/python/venv`), so a
//! second run reinstalls only the package.

use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The target folder this test binary was built in (`target/release/deps/..`).
fn target_dir() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_herdsim"));
    // target/<profile>/herdsim
    bin.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .expect("the binary is in target/<profile>/")
}

fn ok(cmd: &mut Command, what: &str) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_python_package_passes_its_tests() {
    let base = target_dir().join("python");
    let venv = base.join("venv");
    let python = venv.join("bin/python");
    if !python.exists() {
        ok(
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
            "python3 -m venv (the Python tests need python3 with venv)",
        );
    }
    ok(
        Command::new(&python).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "maturin>=1.9.4,<2",
            "pytest>=7",
            "hypothesis>=6",
            "pandas>=1.5",
            "matplotlib>=3.5",
            "websockets>=15",
            "aiohttp>=3.9",
            "matrix-synapse",
        ]),
        "pip install of the test tools",
    );
    // The package as a user installs it: `pip install ./python`.
    ok(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--force-reinstall",
            ])
            .arg(Path::new(ROOT).join("python"))
            .env("CARGO_TARGET_DIR", base.join("build")),
        "pip install ./python",
    );
    let out = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(Path::new(ROOT).join("python/tests"))
        .env("HERDSIM_BIN", env!("CARGO_BIN_EXE_herdsim"))
        // CI runs the Matrix tests: no Synapse is a failure, not a skip.
        .env("HERDSIM_MATRIX", "required")
        // Not from the repo: `import herdsim` must find the installed
        // package, not the source folder.
        .current_dir(&base)
        .output()
        .expect("pytest starts");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(out.status.success(), "pytest failed:\n{text}");
    assert!(text.contains(" passed"), "pytest ran no test:\n{text}");
}
