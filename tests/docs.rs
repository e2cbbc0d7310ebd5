//! The documentation works from a fresh clone.
//!
//! - Every link in every tracked Markdown file resolves inside the repo
//!   (file and `#anchor`), or is a public `https://` URL; nothing anywhere
//!   refers to a folder beside the repo.
//! - In a clone of the repo in a temporary directory (with nothing beside
//!   it), every command of the docs is run and must succeed: each line of a
//!   ```` ```sh ```` block that starts with `herdsim`, `for` or
//!   `cargo run --release --` (run as `herdsim`), each `$ herdsim` line of
//!   any block, and each `#   herdsim` line of a scenario file's header.
//!   They run under `sh` in the clone, in document order, with `herdsim`
//!   a wrapper around the binary under test that shrinks `run` and `tune`
//!   to 2 replications of 30 posts (`--reps 2 --set workload.count=30`;
//!   `tune` also `--grid 2 --max-reps 2`). `cargo test`/`build`/`install`
//!   lines are not run here: CI builds a clean clone in `.ci/run`.
//! - Every ```` ```toml ```` block is validated as a scenario (in
//!   `scenarios/`, or the folder an `<!-- doc-test: validate in DIR -->`
//!   line right above it names), unless an `<!-- doc-test: skip (why) -->`
//!   line says it is not one. The same skip line above any other block
//!   keeps its commands from running (a server that runs until stopped).
//!   Every command runs under a 300 s `timeout`, so a hang fails the test.
//!
//! The clone is taken from the worktree's committed state, with its
//! modified and new (not ignored) files copied over, so the test checks
//! what is in front of you.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn git(args: &[&str], dir: &Path) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs (the doc test needs git)");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Tracked files plus new ones that are not ignored, relative to the root.
fn repo_files() -> Vec<String> {
    let root = Path::new(ROOT);
    let mut files: BTreeSet<String> = git(&["ls-files"], root)
        .lines()
        .map(str::to_string)
        .collect();
    files.extend(
        git(&["ls-files", "--others", "--exclude-standard"], root)
            .lines()
            .map(str::to_string),
    );
    files
        .into_iter()
        .filter(|f| root.join(f).is_file())
        .collect()
}

fn markdown_files() -> Vec<String> {
    repo_files()
        .into_iter()
        .filter(|f| f.ends_with(".md") && !f.starts_with("target/"))
        .collect()
}

/// GitHub's anchor for a heading.
fn slug(heading: &str) -> String {
    let text = heading.trim_start_matches('#').trim();
    let mut s = String::new();
    for c in text.chars() {
        if c.is_alphanumeric() || c == '-' || c == '_' {
            s.extend(c.to_lowercase());
        } else if c == ' ' {
            s.push('-');
        }
    }
    s
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut fence = false;
    for l in text.lines() {
        if l.trim_start().starts_with("```") {
            fence = !fence;
        } else if !fence && l.starts_with('#') {
            out.insert(slug(l));
        }
    }
    out
}

/// Markdown link targets `[..](target)` outside code blocks and code spans.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fence = false;
    for (n, l) in text.lines().enumerate() {
        if l.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        // Drop code spans.
        let mut plain = String::new();
        for (i, part) in l.split('`').enumerate() {
            if i % 2 == 0 {
                plain.push_str(part);
            }
        }
        let mut rest = plain.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((n + 1, after[..end].trim().to_string()));
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_doc_link_stays_in_the_repo_and_resolves() {
    let root = Path::new(ROOT).canonicalize().expect("root");
    let mut bad = Vec::new();
    for f in markdown_files() {
        let path = root.join(&f);
        let text = std::fs::read_to_string(&path).expect("read");
        for (line, target) in links(&text) {
            if target.starts_with("https://") {
                continue;
            }
            if target.contains("://") || target.starts_with("mailto:") {
                bad.push(format!(
                    "{f}:{line}: `{target}`: only https links leave the repo"
                ));
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((a, b)) => (a, Some(b)),
                None => (target.as_str(), None),
            };
            let dest = if file.is_empty() {
                path.clone()
            } else {
                path.parent().expect("parent").join(file)
            };
            let Ok(dest) = dest.canonicalize() else {
                bad.push(format!("{f}:{line}: `{target}`: no such file"));
                continue;
            };
            if !dest.starts_with(&root) {
                bad.push(format!("{f}:{line}: `{target}`: points outside the repo"));
                continue;
            }
            if let Some(a) = anchor {
                let is_md = dest.extension().is_some_and(|e| e == "md");
                let text = std::fs::read_to_string(&dest).unwrap_or_default();
                if is_md && !anchors(&text).contains(a) {
                    bad.push(format!("{f}:{line}: `{target}`: no heading `#{a}` there"));
                }
            }
        }
    }
    assert!(bad.is_empty(), "bad links:\n{}", bad.join("\n"));
}

#[test]
fn nothing_refers_to_a_folder_beside_the_repo() {
    // Built at run time so that this file does not match itself.
    let needles = [format!("..{}shared", '/'), format!("shared{}MODEL", '/')];
    let mut hits = Vec::new();
    for f in repo_files() {
        let Ok(text) = std::fs::read_to_string(Path::new(ROOT).join(&f)) else {
            continue; // binary
        };
        for (n, l) in text.lines().enumerate() {
            if needles.iter().any(|w| l.contains(w.as_str())) {
                hits.push(format!("{f}:{}: {l}", n + 1));
            }
        }
    }
    assert!(hits.is_empty(), "{}", hits.join("\n"));
}

/// A command or a scenario found in the docs.
#[derive(Debug)]
enum Item {
    Command {
        at: String,
        line: String,
    },
    Scenario {
        at: String,
        dir: String,
        toml: String,
    },
}

/// Join `\` continuations and drop a trailing `# comment` (outside quotes).
fn clean(line: &str) -> String {
    let mut out = String::new();
    let (mut single, mut double) = (false, false);
    let mut prev = ' ';
    for c in line.chars() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && prev == ' ' => break,
            _ => {}
        }
        out.push(c);
        prev = c;
    }
    out.trim().to_string()
}

fn doc_items(file: &str, text: &str) -> Vec<Item> {
    let mut items = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim_start();
        if !l.starts_with("```") {
            i += 1;
            continue;
        }
        let lang = l.trim_start_matches('`').trim().to_string();
        let mut marker = String::new();
        for back in lines[..i].iter().rev().take(2) {
            let b = back.trim();
            if b.starts_with("<!-- doc-test:") {
                marker = b.to_string();
                break;
            }
            if !b.is_empty() {
                break;
            }
        }
        let start = i + 1;
        let mut end = start;
        while end < lines.len() && !lines[end].trim_start().starts_with("```") {
            end += 1;
        }
        let body: Vec<&str> = lines[start..end].to_vec();
        let at = format!("{file}:{}", start + 1);
        if lang == "toml" && !marker.contains("skip") {
            let dir = marker
                .split("validate in ")
                .nth(1)
                .map(|d| d.trim_end_matches("-->").trim().to_string())
                .unwrap_or_else(|| "scenarios".into());
            let indent = body
                .iter()
                .filter(|l| !l.trim().is_empty())
                .map(|l| l.len() - l.trim_start().len())
                .min()
                .unwrap_or(0);
            let toml: Vec<&str> = body
                .iter()
                .map(|l| if l.len() >= indent { &l[indent..] } else { "" })
                .collect();
            items.push(Item::Scenario {
                at,
                dir,
                toml: toml.join("\n"),
            });
        } else if !marker.contains("skip") {
            let mut k = 0;
            while k < body.len() {
                let mut cmd = body[k].trim().to_string();
                while cmd.ends_with('\\') && k + 1 < body.len() {
                    cmd.pop();
                    k += 1;
                    cmd.push(' ');
                    cmd.push_str(body[k].trim());
                }
                k += 1;
                let cmd = clean(&cmd);
                let run = if let Some(c) = cmd.strip_prefix("$ ") {
                    c.starts_with("herdsim ").then(|| c.to_string())
                } else if lang == "sh" {
                    if let Some(c) = cmd.strip_prefix("cargo run --release -- ") {
                        Some(format!("herdsim {c}"))
                    } else if cmd.starts_with("herdsim ") || cmd.starts_with("for ") {
                        Some(cmd.clone())
                    } else {
                        None
                    }
                } else {
                    None
                };
                if let Some(line) = run {
                    items.push(Item::Command {
                        at: at.clone(),
                        line,
                    });
                }
            }
        }
        i = end + 1;
    }
    items
}

fn scenario_header_items(file: &str, text: &str) -> Vec<Item> {
    text.lines()
        .enumerate()
        .take_while(|(_, l)| l.starts_with('#') || l.trim().is_empty())
        .filter_map(|(n, l)| {
            let c = l.trim_start_matches('#').trim();
            c.starts_with("herdsim ").then(|| Item::Command {
                at: format!("{file}:{}", n + 1),
                line: clean(c),
            })
        })
        .collect()
}

/// The `herdsim` the doc commands see: the binary under test, with `run`
/// and `tune` shrunk.
const WRAPPER: &str = r#"#!/bin/sh
bin="@BIN@"
case "$1" in
  run) extra="--reps 2 --set workload.count=30" ;;
  tune) extra="--reps 2 --max-reps 2 --grid 2 --set workload.count=30" ;;
  *) exec timeout 300 "$bin" "$@" ;;
esac
sub=$1
shift
n=$#
skip=0
for a in "$@"; do
  if [ "$skip" = 1 ]; then
    skip=0
  elif [ "$a" = --reps ] || [ "$a" = --max-reps ] || [ "$a" = --grid ]; then
    skip=1
  else
    set -- "$@" "$a"
  fi
done
shift "$n"
exec timeout 300 "$bin" "$sub" "$@" $extra
"#;

/// Make a clone of the worktree as it is (committed state plus modified
/// and new files) in `dir`.
fn clone_into(dir: &Path) -> PathBuf {
    let root = Path::new(ROOT);
    let clone = dir.join("herdsim");
    let status = Command::new("git")
        .args(["clone", "--quiet", "--no-hardlinks", ROOT])
        .arg(&clone)
        .status()
        .expect("git clone runs");
    assert!(status.success(), "git clone failed");
    let mut changed: Vec<String> = git(&["ls-files", "--modified"], root)
        .lines()
        .map(str::to_string)
        .collect();
    changed.extend(
        git(&["ls-files", "--others", "--exclude-standard"], root)
            .lines()
            .map(str::to_string),
    );
    for f in changed {
        let src = root.join(&f);
        let dst = clone.join(&f);
        if src.is_file() {
            std::fs::create_dir_all(dst.parent().expect("parent")).expect("mkdir");
            std::fs::copy(&src, &dst).expect("copy");
        } else if dst.exists() {
            let _ = std::fs::remove_file(&dst);
        }
    }
    clone
}

#[test]
fn every_command_and_scenario_in_the_docs_runs_from_a_fresh_clone() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let clone = clone_into(tmp.path());
    // Nothing beside the clone: the temporary folder holds only it.
    let beside: Vec<_> = std::fs::read_dir(tmp.path())
        .expect("ls")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert_eq!(beside.len(), 1, "{beside:?}");

    let bin_dir = tmp.path().join("bin");
    std::fs::create_dir_all(&bin_dir).expect("bin dir");
    let wrapper = bin_dir.join("herdsim");
    std::fs::write(
        &wrapper,
        WRAPPER.replace("@BIN@", env!("CARGO_BIN_EXE_herdsim")),
    )
    .expect("wrapper");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );

    // The README first (its commands are the ones a newcomer runs), then
    // the other docs, then the scenario headers.
    let mut docs: Vec<String> = markdown_files()
        .into_iter()
        .filter(|f| f != "README.md")
        .collect();
    docs.insert(0, "README.md".into());
    let mut items = Vec::new();
    for f in &docs {
        let text = std::fs::read_to_string(clone.join(f)).expect("read doc");
        items.extend(doc_items(f, &text));
    }
    for f in repo_files() {
        if f.starts_with("scenarios/") && f.ends_with(".toml") {
            let text = std::fs::read_to_string(clone.join(&f)).expect("read scenario");
            items.extend(scenario_header_items(&f, &text));
        }
    }
    let commands = items
        .iter()
        .filter(|i| matches!(i, Item::Command { .. }))
        .count();
    assert!(commands >= 20, "only {commands} commands found: {items:?}");
    // The README's two commands are among them.
    let readme = std::fs::read_to_string(clone.join("README.md")).expect("README");
    assert!(readme.contains("cargo run --release -- run scenarios/default.toml"));
    assert!(readme.contains("cargo test --release"));

    let mut failures = Vec::new();
    for (k, item) in items.iter().enumerate() {
        match item {
            Item::Command { at, line } => {
                let out = Command::new("sh")
                    .arg("-c")
                    .arg(line)
                    .current_dir(&clone)
                    .env("PATH", &path)
                    .output()
                    .expect("sh runs");
                if !out.status.success() {
                    failures.push(format!(
                        "{at}: `{line}` exited {:?}:\n{}",
                        out.status.code(),
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
            }
            Item::Scenario { at, dir, toml } => {
                let file = clone.join(dir).join(format!("doc-test-{k}.toml"));
                std::fs::write(&file, toml).expect("write scenario");
                let out = Command::new(env!("CARGO_BIN_EXE_herdsim"))
                    .arg("validate")
                    .arg(&file)
                    .current_dir(&clone)
                    .output()
                    .expect("validate runs");
                if !out.status.success() {
                    failures.push(format!(
                        "{at}: the scenario does not validate:\n{}",
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
                let _ = std::fs::remove_file(&file);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_extractor_finds_commands_and_scenarios() {
    let doc = "text\n\n```sh\nherdsim run a.toml --set 'x=[1, 2]'   # a comment\n\
               herdsim run b.toml \\\n    --reps 3\ncargo test --release\n\
               cargo run --release -- run c.toml\n```\n\n\
               <!-- doc-test: skip (not one) -->\n```toml\nformat = 1\n```\n\
               ```toml\n[server]\nttl_ms = 1\n```\n```\n$ herdsim tune d.toml\n```\n";
    let items = doc_items("x.md", doc);
    let cmds: Vec<&str> = items
        .iter()
        .filter_map(|i| match i {
            Item::Command { line, .. } => Some(line.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        cmds,
        [
            "herdsim run a.toml --set 'x=[1, 2]'",
            "herdsim run b.toml  --reps 3",
            "herdsim run c.toml",
            "herdsim tune d.toml"
        ]
    );
    let scen: Vec<&str> = items
        .iter()
        .filter_map(|i| match i {
            Item::Scenario { toml, .. } => Some(toml.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(scen, ["[server]\nttl_ms = 1"]);
    assert_eq!(slug("## `[sweep]`"), "sweep");
    assert_eq!(
        slug("## Interrupted runs: the journal and --resume"),
        "interrupted-runs-the-journal-and---resume"
    );
}
