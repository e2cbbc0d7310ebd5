//! Everything herdsim prints for a reader fits 80 columns when stdout is
//! not a terminal (as here): every subcommand's `--help` and `-h`, and the
//! table of the default scenario and of a two-key sweep.

use assert_cmd::Command;

const WIDTH: usize = 80;

fn herdsim() -> Command {
    Command::cargo_bin("herdsim").expect("binary builds")
}

fn stdout(args: &[&str]) -> String {
    let out = herdsim().args(args).output().expect("runs");
    assert!(out.status.success(), "herdsim {args:?}: {:?}", out);
    String::from_utf8(out.stdout).expect("utf-8")
}

fn wide_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.chars().count() > WIDTH)
        .map(|l| format!("{} columns: {l}", l.chars().count()))
        .collect()
}

/// The subcommands `herdsim --help` lists.
fn subcommands() -> Vec<String> {
    let help = stdout(&["--help"]);
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A wrapped description continues further in.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn every_help_fits_80_columns() {
    let subs = subcommands();
    assert!(subs.len() >= 8, "{subs:?}");
    let mut wide = Vec::new();
    for flag in ["--help", "-h"] {
        wide.extend(wide_lines(&stdout(&[flag])));
        for s in &subs {
            for l in wide_lines(&stdout(&[s, flag])) {
                wide.push(format!("herdsim {s} {flag}: {l}"));
            }
        }
    }
    assert!(wide.is_empty(), "{}", wide.join("\n"));
}

#[test]
fn the_tables_fit_80_columns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().to_str().expect("utf-8");
    let default = stdout(&["run", "--quiet", "--out", out]);
    assert!(default.contains("server-time"), "{default}");
    let faults = stdout(&[
        "run",
        "scenarios/faults.toml",
        "--reps",
        "2",
        "--set",
        "workload.count=20",
        "--quiet",
        "--no-plot",
        "--out",
        out,
    ]);
    let mut wide = wide_lines(&default);
    wide.extend(wide_lines(&faults));
    assert!(wide.is_empty(), "{}", wide.join("\n"));
}
