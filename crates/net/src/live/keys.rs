//! `--keyed` identities: one secret per user, kept in a key file, from
//! which each agent's (and the operator's) Ed25519 key is derived as
//! SHA-256 of the secret and its name. The keys are stable across runs (a
//! real agentchat server lets a new key post only after an hour, its lurk
//! window, so the same keys must come back), and no two users share them
//! (they were derived from the names alone before: every herdsim user in
//! the world had the same identities).
//!
//! The file is `--key-file PATH`, else `$HERDSIM_KEY_FILE`, else
//! `$XDG_DATA_HOME/herdsim/live-identity.key` (`~/.local/share/...` when
//! `XDG_DATA_HOME` is unset). It is created on first use, readable by its
//! owner only, from the operating system's random source; it holds the
//! secret as 64 hexadecimal digits on one line.

use rand::TryRng;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The environment variable naming the key file.
pub const KEY_FILE_ENV: &str = "HERDSIM_KEY_FILE";

/// The file name under the data directory.
const FILE: &str = "herdsim/live-identity.key";

/// A key file larger than this is not one of ours.
const MAX_FILE_BYTES: u64 = 1024;

/// The secret from which the identities are derived.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret([u8; 32]);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// Why the key file could not be used (all bad input: exit 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {reason}", path.display())]
pub struct KeyError {
    pub path: PathBuf,
    pub reason: String,
}

fn err(path: &Path, reason: impl Into<String>) -> KeyError {
    KeyError {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// The default key file, from the environment (`HERDSIM_KEY_FILE`,
/// `XDG_DATA_HOME`, `HOME`); None when none of them is set.
pub fn default_path() -> Option<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var(KEY_FILE_ENV)
        .or_else(|| var("XDG_DATA_HOME").map(|d| d.join(FILE)))
        .or_else(|| var("HOME").map(|h| h.join(".local/share").join(FILE)))
}

/// The secret in `path`, created there (with its folder) if the file does
/// not exist yet.
pub fn load_or_create(path: &Path) -> Result<Secret, KeyError> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => load(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => create(path),
        Err(e) => Err(err(path, e.to_string())),
    }
}

fn load(path: &Path) -> Result<Secret, KeyError> {
    // Followed links are fine; a FIFO or a device would block or never end.
    let meta = std::fs::metadata(path).map_err(|e| err(path, e.to_string()))?;
    if !meta.is_file() {
        return Err(err(path, "not a regular file"));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(err(path, "too large to be a herdsim key file"));
    }
    let text = std::fs::read_to_string(path).map_err(|e| err(path, e.to_string()))?;
    parse(text.trim()).ok_or_else(|| {
        err(
            path,
            "not a herdsim key file (64 hexadecimal digits expected); remove it and a new \
             one is made, with new identities",
        )
    })
}

fn parse(hex: &str) -> Option<Secret> {
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut k = [0u8; 32];
    for (i, b) in k.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(Secret(k))
}

fn create(path: &Path) -> Result<Secret, KeyError> {
    let mut k = [0u8; 32];
    rand::rngs::SysRng
        .try_fill_bytes(&mut k)
        .map_err(|e| err(path, format!("no random source: {e}")))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| err(dir, e.to_string()))?;
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = match opts.open(path) {
        Ok(f) => f,
        // Another run made it first: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return load(path),
        Err(e) => return Err(err(path, e.to_string())),
    };
    let hex: String = k.iter().map(|b| format!("{b:02x}")).collect();
    f.write_all(format!("{hex}\n").as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| err(path, e.to_string()))?;
    Ok(Secret(k))
}

impl Secret {
    /// The Ed25519 key of `name`.
    pub fn key_of(&self, name: &str) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(b"herdsim live identity v1\0");
        h.update(self.0);
        h.update(name.as_bytes());
        h.finalize().into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_once_then_the_same_keys() {
        let tmp = tempfile::tempdir().expect("tmp");
        let path = tmp.path().join("a/b/live-identity.key");
        let s = load_or_create(&path).expect("created");
        let again = load_or_create(&path).expect("read");
        assert_eq!(s, again);
        assert_eq!(s.key_of("agent-000"), again.key_of("agent-000"));
        assert_ne!(s.key_of("agent-000"), s.key_of("agent-001"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // Another user's file: other keys for the same names.
        let other = load_or_create(&tmp.path().join("other.key")).expect("created");
        assert_ne!(s.key_of("agent-000"), other.key_of("agent-000"));
    }

    #[test]
    fn a_bad_file_is_refused_naming_it() {
        let tmp = tempfile::tempdir().expect("tmp");
        let path = tmp.path().join("k");
        std::fs::write(&path, "not hex\n").expect("write");
        let e = load_or_create(&path).expect_err("refused");
        assert_eq!(e.path, path);
        assert!(e.reason.contains("64 hexadecimal digits"), "{e}");
        let e = load_or_create(tmp.path()).expect_err("a folder");
        assert!(e.reason.contains("not a regular file"), "{e}");
        assert!(parse(&"ab".repeat(32)).is_some());
        assert!(parse(&"zz".repeat(32)).is_none());
    }
}
