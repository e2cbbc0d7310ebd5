//! Whether two paths name the same file, for files that may not exist
//! yet: an output must never be one of the inputs.

use std::path::{Component, Path, PathBuf};

/// `p` made absolute with `.` and `..` applied by name, then its longest
/// existing ancestor resolved (symbolic links) and the rest appended.
pub fn resolve(p: &Path) -> PathBuf {
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("."))
            .join(p)
    };
    let mut clean = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                clean.pop();
            }
            Component::CurDir => {}
            other => clean.push(other),
        }
    }
    // Split into the longest prefix that exists and the rest.
    let mut head = clean;
    let mut tail: Vec<std::ffi::OsString> = Vec::new();
    let base = loop {
        if let Ok(c) = head.canonicalize() {
            break c;
        }
        match (head.file_name(), head.parent()) {
            (Some(name), Some(parent)) => {
                tail.push(name.to_os_string());
                head = parent.to_path_buf();
            }
            _ => break head,
        }
    };
    let mut out = base;
    for part in tail.iter().rev() {
        out.push(part);
    }
    out
}

/// Whether `a` and `b` name the same file (existing or not).
pub fn same(a: &Path, b: &Path) -> bool {
    resolve(a) == resolve(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_file_by_other_names() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        std::fs::create_dir_all(d.join("a/b")).expect("mkdir");
        std::fs::write(d.join("a/x.toml"), "").expect("write");
        assert!(same(&d.join("a/x.toml"), &d.join("a/b/../x.toml")));
        assert!(same(&d.join("a/./x.toml"), &d.join("a/x.toml")));
        // Neither exists yet.
        assert!(same(&d.join("a/new/y.csv"), &d.join("a/b/../new/./y.csv")));
        assert!(!same(&d.join("a/x.toml"), &d.join("a/b/x.toml")));
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(d.join("a"), d.join("link")).expect("symlink");
            assert!(same(&d.join("link/x.toml"), &d.join("a/x.toml")));
        }
    }
}
