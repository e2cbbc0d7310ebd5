//! Write a file so that readers see either the old file or the whole new
//! one, never half of it: write a temporary file beside it, then rename.
//! Only a regular file (or a name not there yet) is replaced so: a stream
//! the user names (`/dev/stdout`, `/dev/null`, a named pipe with a reader)
//! is written through, and anything else (a symbolic link, a device, a
//! folder) is refused ([`crate::files::output_target`]).

use crate::files::{self, Target};
use std::io::Write;
use std::path::Path;

/// Write `bytes` to `path` atomically (creating parent directories), or
/// through to a stream; a path that is neither is refused
/// ([`files::Refused`] inside the error).
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let target = files::output_target(path)?;
    if target != Target::File {
        let mut f = files::open_through(path, target)?;
        return f.write_all(bytes).and_then(|()| f.flush());
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    #[test]
    fn writes_and_replaces() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("a/b.csv");
        super::write(&p, b"one").expect("write");
        super::write(&p, b"two").expect("write");
        assert_eq!(std::fs::read(&p).expect("read"), b"two");
        let names: Vec<_> = std::fs::read_dir(dir.path().join("a"))
            .expect("dir")
            .collect();
        assert_eq!(names.len(), 1, "no temp file left behind");
    }

    #[cfg(unix)]
    #[test]
    fn never_replaces_a_link_or_a_device() {
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("target.csv");
        std::fs::write(&target, "keep").expect("write");
        let link = dir.path().join("link.csv");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        let e = super::write(&link, b"new").expect_err("a link");
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(std::fs::symlink_metadata(&link).expect("link").is_symlink());
        assert_eq!(std::fs::read(&target).expect("read"), b"keep");
        // A character device: a twin of /dev/full where mknod works (root),
        // so that a regression would replace nothing that matters.
        let dev = dir.path().join("full");
        let made = std::process::Command::new("mknod")
            .arg(&dev)
            .args(["c", "1", "7"])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if made {
            let e = super::write(&dev, b"x").expect_err("device");
            assert!(e.to_string().contains("a character device"), "{e}");
            assert!(!std::fs::metadata(&dev).expect("device").is_file());
        }
        super::write(std::path::Path::new("/dev/null"), b"x").expect("/dev/null");
        assert!(
            std::fs::metadata("/dev/null")
                .map(|m| !m.is_file())
                .unwrap_or(false)
        );
    }
}
