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
//!   a wrapper ([`WRAPPER`]) around the binary under test that reduces
//!   them, each from its relative `--out` (the default `results`):
//!   - `run` and `tune` to 2 replications of 30 posts (`--reps 2 --set
//!     workload.count=30`; `tune` also `--grid 2 --max-reps 2`);
//!   - `live` to `--speed 1000 --reps 1 --set workload.count=4` (its
//!     `--speed` and `--reps` replaced; a later `--set` wins);
//!   - `observe` to `--duration 3s`, with short `live` runs on the same
//!     server, one after another while it watches, so that there are
//!     questions to calibrate;
//!   - `serve` to an ephemeral port (`--listen 127.0.0.1:0`), stopped
//!     cleanly with SIGINT after 1 s (it must exit 0).
//!
//!   The servers the docs point at are the test's own `herdsim serve`s,
//!   started on ephemeral loopback ports for the whole run ([`Server`]):
//!   the wrapper rewrites `ws://127.0.0.1:6667` to the plain one (policy
//!   `spec`) and `wss://localhost:6667` to the TLS one (the test CA's
//!   certificate, tests/data/tls). A line that ends in `&` (a server or an
//!   observer for the next lines) runs in the foreground, so that its exit
//!   status is checked. The files the docs name as the reader's own are
//!   stand-ins made in the clone ([`STAND_INS`]: `my.toml` is the default
//!   scenario, `ca.pem`, `server.pem` and `server.key` the test CA's). The
//!   `--keyed` secret is a scratch file (`HERDSIM_KEY_FILE`), never the
//!   user's. A block holding a `live`, `observe` or `serve` command must
//!   say what the test reduces in a `<!-- doc-test: reduced (...) -->` line
//!   right above it. `cargo test`/`build`/`install` lines are not run
//!   here: CI builds a clean clone in `.ci/run`.
//! - Every ```` ```toml ```` block is validated as a scenario (in
//!   `scenarios/`, or the folder an `<!-- doc-test: validate in DIR -->`
//!   line right above it names), unless an `<!-- doc-test: skip (why) -->`
//!   line says it is not one. The same skip line above any other block
//!   keeps its commands from running: only for a server we do not ship
//!   (a real agentchat server, a public one), the line says which. Every
//!   command runs under a 300 s `timeout`, so a hang fails the test.
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

/// The cells of a table row as GitHub-flavoured Markdown splits them: on
/// every `|` not escaped with a backslash (inside code spans too), a
/// leading and a trailing `|` dropped.
fn table_cells(line: &str) -> usize {
    let row = line.trim();
    let row = row.strip_prefix('|').unwrap_or(row);
    let row = match row.strip_suffix('|') {
        Some(r) if !r.ends_with('\\') => r,
        _ => row,
    };
    let mut cells = 1;
    let mut escaped = false;
    for c in row.chars() {
        if c == '|' && !escaped {
            cells += 1;
        }
        escaped = c == '\\' && !escaped;
    }
    cells
}

/// A table's delimiter row: `|---|:--:|`, every cell dashes with optional
/// colons, and at least one `|` (a line of dashes alone is a rule).
fn is_delimiter_row(line: &str) -> bool {
    let row = line.trim();
    row.contains('|')
        && row.contains('-')
        && row.trim_matches('|').split('|').all(|c| {
            let c = c.trim();
            let c = c.strip_prefix(':').unwrap_or(c);
            let c = c.strip_suffix(':').unwrap_or(c);
            !c.is_empty() && c.chars().all(|x| x == '-')
        })
}

/// Every table of `text` (outside code blocks) whose delimiter row has
/// another number of cells than its header: GitHub then renders no table
/// at all. As (line, header cells, delimiter cells).
fn broken_tables(text: &str) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    let mut fence = false;
    let mut prev: Option<&str> = None;
    for (n, l) in text.lines().enumerate() {
        if l.trim_start().starts_with("```") {
            fence = !fence;
            prev = None;
            continue;
        }
        if fence {
            continue;
        }
        if let Some(h) = prev.filter(|h| h.contains('|') && is_delimiter_row(l)) {
            let (hc, dc) = (table_cells(h), table_cells(l));
            if hc != dc {
                out.push((n + 1, hc, dc));
            }
        }
        prev = Some(l);
    }
    out
}

#[test]
fn every_markdown_table_has_a_delimiter_row_as_wide_as_its_header() {
    // The check itself: one column too many is caught, an escaped pipe
    // and a code span are not miscounted, a rule is not a table.
    let doc = "| a | b |\n|---|---|---|\n| 1 | 2 |\n\n| `x\\|y` | b |\n|:--|--:|\n\n\
               text\n---\n\n```\n| a |\n|---|---|\n```\n";
    assert_eq!(broken_tables(doc), [(2, 2, 3)]);
    assert_eq!(table_cells("a | b"), 2);
    let mut broken = Vec::new();
    let mut tables = 0;
    for f in markdown_files() {
        let text = std::fs::read_to_string(Path::new(ROOT).join(&f)).expect("reads");
        tables += text.lines().filter(|l| is_delimiter_row(l)).count();
        for (line, h, d) in broken_tables(&text) {
            broken.push(format!(
                "{f}:{line}: a header of {h} cells, a delimiter row of {d}"
            ));
        }
    }
    assert!(tables > 10, "found only {tables} tables");
    assert!(
        broken.is_empty(),
        "tables that do not render:\n{}",
        broken.join("\n")
    );
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
        /// The `<!-- doc-test: ... -->` line above its block, if any.
        marker: String,
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
                        marker: marker.clone(),
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
                marker: String::new(),
            })
        })
        .collect()
}

/// The `herdsim` the doc commands see: the binary under test, with `run`
/// and `tune` shrunk, `live` and `observe` sped up and pointed at the
/// test's servers, and `serve` stopped after a second.
const WRAPPER: &str = r#"#!/bin/sh
bin="@BIN@"
sub=$1
shift
drop=""
extra=""
case "$sub" in
  run) drop="--reps"; extra="--reps 2 --set workload.count=30" ;;
  tune) drop="--reps --max-reps --grid"; extra="--reps 2 --max-reps 2 --grid 2 --set workload.count=30" ;;
  live) drop="--speed --reps"; extra="--speed 1000 --reps 1 --set workload.count=4" ;;
  observe) drop="--duration"; extra="--duration 3s" ;;
  serve) drop="--listen"; extra="--listen 127.0.0.1:0" ;;
  *) exec timeout 300 "$bin" "$sub" "$@" ;;
esac
n=$#
skip=0
for a in "$@"; do
  if [ "$skip" = 1 ]; then
    skip=0
    continue
  fi
  case " $drop " in
    *" $a "*) skip=1; continue ;;
  esac
  case "$a" in
    ws://127.0.0.1:6667) a="ws://$HERDSIM_DOC_WS" ;;
    wss://localhost:6667) a="wss://$HERDSIM_DOC_WSS" ;;
  esac
  set -- "$@" "$a"
done
shift "$n"
case "$sub" in
  serve) exec timeout --preserve-status -s INT 1 "$bin" serve "$@" $extra ;;
  observe)
    timeout 300 "$bin" observe "$@" $extra &
    obs=$!
    # Questions for observe to see: short live runs on the same server,
    # one after another, for as long as it watches.
    (while kill -0 "$obs" 2>/dev/null; do
      timeout 60 "$bin" live --url "ws://$HERDSIM_DOC_WS" --policy spec --speed 1000 \
        --reps 1 --set workload.count=5 --quiet --out "$HERDSIM_DOC_TMP/traffic" >/dev/null 2>&1 || sleep 0.2
    done) &
    wait "$obs"
    status=$?
    wait
    exit $status ;;
esac
exec timeout 300 "$bin" "$sub" "$@" $extra
"#;

/// A `herdsim serve` on an ephemeral loopback port for the doc commands
/// (under `timeout`, so that it stops by itself even if the test dies);
/// stopped with SIGTERM when dropped.
struct Server {
    child: std::process::Child,
    /// `HOST:PORT` as it printed it.
    addr: String,
}

impl Server {
    fn start(args: &[&std::ffi::OsStr]) -> Server {
        use std::io::BufRead;
        let mut child = Command::new("timeout")
            .args(["-s", "TERM", "600", env!("CARGO_BIN_EXE_herdsim"), "serve"])
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("serve starts");
        let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
        let mut line = String::new();
        stderr.read_line(&mut line).expect("a line");
        // Keep reading, so that the server never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        let addr = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("ws://").or_else(|| w.strip_prefix("wss://")))
            .unwrap_or_else(|| panic!("no address in {line}"))
            .to_string();
        Server { child, addr }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // `timeout` passes SIGTERM on to the server, which stops cleanly.
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// Files the docs name as the reader's own, made in the clone: a scenario
/// of theirs (a copy of the default one) and the TLS files of a server of
/// theirs (the test CA's, tests/data/tls).
const STAND_INS: [(&str, &str); 5] = [
    ("my.toml", "scenarios/default.toml"),
    ("my-herd.toml", "scenarios/default.toml"),
    ("server.pem", "tests/data/tls/server.pem"),
    ("server.key", "tests/data/tls/server.key"),
    ("ca.pem", "tests/data/tls/ca.pem"),
];

/// The subcommands the wrapper reduces beyond `run` and `tune`: their
/// blocks must say so (`<!-- doc-test: reduced (...) -->`).
const REDUCED: [&str; 3] = ["herdsim live", "herdsim observe", "herdsim serve"];

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
    for (name, from) in STAND_INS {
        std::fs::copy(clone.join(from), clone.join(name)).expect("stand-in");
    }
    let tls = |f: &str| clone.join("tests/data/tls").join(f).into_os_string();
    let ws = Server::start(&[]);
    let wss = Server::start(&[
        "--tls-cert".as_ref(),
        &tls("server.pem"),
        "--tls-key".as_ref(),
        &tls("server.key"),
    ]);
    // The certificate names `localhost` only.
    let wss_addr = wss.addr.replace("127.0.0.1", "localhost");
    let scratch = tmp.path().join("scratch");
    std::fs::create_dir_all(&scratch).expect("scratch");

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
    assert!(readme.contains("cargo test --release --no-fail-fast"));

    // Each kind of reduced command is run, none skipped as a whole.
    for kind in REDUCED {
        assert!(
            items
                .iter()
                .any(|i| matches!(i, Item::Command { line, .. } if line.starts_with(kind))),
            "no `{kind}` command runs: {items:?}"
        );
    }

    let mut failures = Vec::new();
    for (k, item) in items.iter().enumerate() {
        match item {
            Item::Command { at, line, marker } => {
                if REDUCED.iter().any(|r| line.starts_with(r))
                    && !marker.starts_with("<!-- doc-test: reduced (")
                {
                    failures.push(format!(
                        "{at}: `{line}` runs reduced here: say how beside it, in a \
                         `<!-- doc-test: reduced (...) -->` line above its block"
                    ));
                }
                // A server or an observer sent to the background for the
                // next lines runs in the foreground here (bounded by the
                // wrapper), so that its exit status is checked.
                let line = line.strip_suffix('&').map_or(line.as_str(), str::trim_end);
                let out = Command::new("sh")
                    .arg("-c")
                    .arg(line)
                    .current_dir(&clone)
                    .env("PATH", &path)
                    .env("HERDSIM_DOC_WS", &ws.addr)
                    .env("HERDSIM_DOC_WSS", &wss_addr)
                    .env("HERDSIM_DOC_TMP", &scratch)
                    .env("HERDSIM_KEY_FILE", scratch.join("identity.key"))
                    .env("XDG_DATA_HOME", &scratch)
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
    drop((ws, wss));
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
