//! Files as herdsim opens them, in one place (docs/safety.md, "Files
//! herdsim reads and writes").
//!
//! - **Inputs** ([`open_input`], [`read_input`]) must be regular files: a
//!   FIFO, a device, a socket or a folder is refused before anything is
//!   read, so nothing blocks forever (a FIFO with no writer) or never ends
//!   (`/dev/zero`). The check is made on the path, then again on what was
//!   opened (opened without blocking), so a file swapped in between is
//!   caught too.
//! - **Outputs** ([`output_target`], [`create_in_place`], and report's
//!   `write_atomic`, built on them, for files replaced by rename): a
//!   regular file, or a name not there yet, is written; `/dev/stdout`,
//!   `/dev/stderr` (and `/dev/fd/1`, `/dev/fd/2`), `/dev/null` and a named
//!   pipe that has a reader are written through, as streams; anything else
//!   (a symbolic link, a folder, any other device, a socket, a named pipe
//!   nobody reads) is refused, so nothing is ever replaced that is not a
//!   regular file and no open blocks.
//!
//! A refusal is a [`Refused`] (wrapped in an [`io::Error`] where the caller
//! deals in those): bad input, exit 2 (see [`is_refused`]).

use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::path::Path;

/// Why a path cannot be used as an input or an output: bad input (exit 2).
/// The text names what the path is, not the path (the caller names it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

impl From<Refused> for io::Error {
    fn from(r: Refused) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidInput, r)
    }
}

/// Whether an error (anywhere in its chain) is a [`Refused`] file: the CLI
/// maps it to exit 2.
pub fn is_refused(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<Refused>().is_some()
            || c.downcast_ref::<io::Error>().is_some_and(is_refused_io)
    })
}

/// Whether an [`io::Error`] carries a [`Refused`] file.
pub fn is_refused_io(e: &io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.downcast_ref::<Refused>().is_some())
}

/// What a file of this type is, in words ("a FIFO (named pipe)").
fn kind(meta: &Metadata) -> &'static str {
    let ft = meta.file_type();
    if ft.is_dir() {
        return "a folder";
    }
    if ft.is_symlink() {
        return "a symbolic link";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if ft.is_char_device() {
            return "a character device";
        }
        if ft.is_block_device() {
            return "a block device";
        }
        if ft.is_socket() {
            return "a socket";
        }
    }
    if ft.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// `meta` (of an input) must be a regular file.
fn regular_input(meta: &Metadata) -> Result<(), Refused> {
    if meta.is_file() {
        return Ok(());
    }
    Err(Refused(format!(
        "is {}, not a regular file: herdsim reads its inputs from regular files (a FIFO or a \
         device could block or never end)",
        kind(meta)
    )))
}

/// Open `path` for reading, refusing anything but a regular file (after
/// symbolic links) before it is read, without ever blocking in `open`.
pub fn open_input(path: &Path) -> io::Result<File> {
    regular_input(&std::fs::metadata(path)?)?;
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // A FIFO swapped in after the check opens without waiting for a
        // writer (and is refused below); no effect on a regular file.
        opts.custom_flags(libc::O_NONBLOCK);
    }
    let file = opts.open(path)?;
    regular_input(&file.metadata()?)?;
    Ok(file)
}

/// The whole of input `path` ([`open_input`]), at most `max` bytes: a
/// longer file is refused ([`Refused`]) before more than `max + 1` bytes
/// are read.
pub fn read_input(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let file = open_input(path)?;
    let len = file.metadata()?.len();
    let too_big = |n: u64| -> io::Error {
        let mib = if max.is_multiple_of(1 << 20) {
            format!(" ({} MiB)", max >> 20)
        } else {
            String::new()
        };
        Refused(format!(
            "is {n} bytes or more, larger than the {max} bytes{mib} herdsim reads from such a \
             file"
        ))
        .into()
    };
    if len > max {
        return Err(too_big(len));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}

/// What an output path is, and so how it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Not there yet, or a regular file: written whole (replaced by rename
    /// where the writer does so).
    File,
    /// The process's standard output or error (`/dev/stdout`, `/dev/fd/1`;
    /// `/dev/stderr`, `/dev/fd/2`): written to the stream it already has.
    Stdout,
    Stderr,
    /// `/dev/null` or a FIFO (named pipe), written through.
    Through,
}

/// How output `path` is written, or why it cannot be ([`Refused`]): see
/// the module's documentation. A FIFO is only classified here; whether it
/// has a reader is known when it is opened ([`open_through`]).
pub fn output_target(path: &Path) -> Result<Target, Refused> {
    let text = path.to_string_lossy();
    match text.as_ref() {
        "/dev/stdout" | "/dev/fd/1" | "/proc/self/fd/1" => return Ok(Target::Stdout),
        "/dev/stderr" | "/dev/fd/2" | "/proc/self/fd/2" => return Ok(Target::Stderr),
        _ => {}
    }
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        // Not there (or not reachable): the write itself says what is wrong.
        Err(_) => return Ok(Target::File),
    };
    let ft = meta.file_type();
    if ft.is_file() {
        return Ok(Target::File);
    }
    if ft.is_symlink() {
        let to = std::fs::read_link(path)
            .map(|t| format!(" (to {})", t.display()))
            .unwrap_or_default();
        return Err(Refused(format!(
            "is a symbolic link{to}: herdsim neither replaces a link nor writes through one \
             (it could overwrite a file elsewhere); name the file itself, or remove the link"
        )));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() || (ft.is_char_device() && path == Path::new("/dev/null")) {
            return Ok(Target::Through);
        }
    }
    Err(Refused(format!(
        "is {}: herdsim writes its outputs to regular files (or to /dev/stdout, /dev/stderr, \
         /dev/null or a named pipe that has a reader) and never replaces anything else",
        kind(&meta)
    )))
}

/// [`output_target`], and for a named pipe whether it has a reader now (a
/// check made before any work, so that a run does not end refused). The
/// pipe opened for the check is kept open and is the one [`open_through`]
/// later writes to: closing it would tell the reader the stream has ended.
pub fn check_output(path: &Path) -> Result<Target, Refused> {
    let target = output_target(path)?;
    if target == Target::Through {
        let file = open_stream(path).map_err(|e| {
            match e.get_ref().and_then(|i| i.downcast_ref::<Refused>()) {
                Some(r) => r.clone(),
                None => Refused(format!("cannot be opened for writing: {e}")),
            }
        })?;
        if let Ok(mut held) = HELD.lock() {
            held.push((path.to_path_buf(), file));
        }
    }
    Ok(target)
}

/// Streams [`check_output`] opened, until they are written.
static HELD: std::sync::Mutex<Vec<(std::path::PathBuf, File)>> = std::sync::Mutex::new(Vec::new());

/// The stream [`check_output`] opened for `path`, if any.
fn take_held(path: &Path) -> Option<File> {
    let mut held = HELD.lock().ok()?;
    let i = held.iter().position(|(p, _)| p == path)?;
    Some(held.swap_remove(i).1)
}

/// Open an output that is written through ([`Target::Stdout`],
/// [`Target::Stderr`], [`Target::Through`]) for writing, without blocking:
/// a FIFO with no reader is refused. `Target::File` is created (truncated).
pub fn open_through(path: &Path, target: Target) -> io::Result<File> {
    match target {
        Target::File => File::create(path),
        Target::Stdout => dup_std(1),
        Target::Stderr => dup_std(2),
        Target::Through => match take_held(path) {
            Some(file) => Ok(file),
            None => open_stream(path),
        },
    }
}

#[cfg(unix)]
fn dup_std(fd: i32) -> io::Result<File> {
    use std::os::fd::AsFd;
    let owned = if fd == 1 {
        io::stdout().as_fd().try_clone_to_owned()?
    } else {
        io::stderr().as_fd().try_clone_to_owned()?
    };
    Ok(File::from(owned))
}

#[cfg(not(unix))]
fn dup_std(_fd: i32) -> io::Result<File> {
    Err(Refused("standard streams as files are supported on Unix only".into()).into())
}

#[cfg(unix)]
fn open_stream(path: &Path) -> io::Result<File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENXIO) => Refused(
                "is a FIFO (named pipe) that nobody reads: start its reader first (herdsim \
                 does not wait for one)"
                    .into(),
            )
            .into(),
            _ => e,
        })?;
    // Checked again on what was opened (a swap after output_target).
    match output_target_of(&file.metadata()?, path) {
        Some(Target::Through) => {}
        _ => {
            return Err(Refused(
                "changed into something that is not a named pipe or /dev/null while it was \
                 opened"
                    .into(),
            )
            .into());
        }
    }
    // Blocking writes from here on: a reader that is slow is waited for.
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor this function owns (`file` outlives
    // both calls); F_GETFL/F_SETFL touch only its status flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}

#[cfg(unix)]
fn output_target_of(meta: &Metadata, path: &Path) -> Option<Target> {
    use std::os::unix::fs::FileTypeExt;
    let ft = meta.file_type();
    (ft.is_fifo() || (ft.is_char_device() && path == Path::new("/dev/null")))
        .then_some(Target::Through)
}

#[cfg(not(unix))]
fn open_stream(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new().write(true).open(path)
}

/// Open output `path` to be written in place (a log appended as it goes):
/// a regular file is created or truncated, a stream ([`Target`]) written
/// through; anything else is refused ([`Refused`] in the error).
pub fn create_in_place(path: &Path) -> io::Result<File> {
    let target = output_target(path)?;
    open_through(path, target)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::io::Write;

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    }

    fn refused(e: &io::Error) -> String {
        e.get_ref()
            .and_then(|i| i.downcast_ref::<Refused>())
            .map(|r| r.0.clone())
            .unwrap_or_else(|| panic!("not a refusal: {e}"))
    }

    #[test]
    fn inputs_must_be_regular_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("a.toml");
        std::fs::write(&file, "x = 1\n").expect("write");
        assert_eq!(read_input(&file, 100).expect("reads"), b"x = 1\n");
        // A link to a regular file is read (inputs follow links).
        let link = dir.path().join("link.toml");
        std::os::unix::fs::symlink(&file, &link).expect("symlink");
        assert_eq!(read_input(&link, 100).expect("reads"), b"x = 1\n");
        let too_big = read_input(&file, 3).expect_err("too big");
        assert!(refused(&too_big).contains("larger than the 3 bytes"));
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo);
        // Would block for ever without the check (no writer).
        assert!(refused(&open_input(&fifo).expect_err("fifo")).contains("a FIFO (named pipe)"));
        for (p, what) in [
            (Path::new("/dev/zero"), "a character device"),
            (dir.path(), "a folder"),
        ] {
            assert!(
                refused(&open_input(p).expect_err("refused")).contains(what),
                "{p:?}"
            );
        }
        assert_eq!(
            open_input(&dir.path().join("none"))
                .expect_err("missing")
                .kind(),
            io::ErrorKind::NotFound
        );
    }

    #[test]
    fn outputs_are_files_streams_or_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("out.csv");
        assert_eq!(output_target(&file), Ok(Target::File));
        std::fs::write(&file, "x").expect("write");
        assert_eq!(output_target(&file), Ok(Target::File));
        assert_eq!(output_target(Path::new("/dev/stdout")), Ok(Target::Stdout));
        assert_eq!(output_target(Path::new("/dev/fd/2")), Ok(Target::Stderr));
        assert_eq!(output_target(Path::new("/dev/null")), Ok(Target::Through));
        let link = dir.path().join("link.csv");
        std::os::unix::fs::symlink(&file, &link).expect("symlink");
        let e = output_target(&link).expect_err("link");
        assert!(
            e.0.contains("is a symbolic link (to ") && e.0.contains("out.csv"),
            "{e}"
        );
        for (p, what) in [
            (Path::new("/dev/full"), "a character device"),
            (Path::new("/dev/zero"), "a character device"),
            (dir.path(), "a folder"),
        ] {
            let e = output_target(p).expect_err("refused");
            assert!(e.0.starts_with(&format!("is {what}:")), "{p:?}: {e}");
        }
        // /dev/null takes the bytes.
        create_in_place(Path::new("/dev/null"))
            .and_then(|mut f| f.write_all(b"gone"))
            .expect("/dev/null");
    }

    #[test]
    fn a_fifo_is_written_through_only_while_someone_reads_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("pipe");
        mkfifo(&fifo);
        assert_eq!(output_target(&fifo), Ok(Target::Through));
        // Nobody reads: refused at once instead of blocking.
        let e = create_in_place(&fifo).expect_err("no reader");
        assert!(refused(&e).contains("nobody reads"), "{e}");
        // A reader (opened without blocking): the bytes go through.
        use std::os::unix::fs::OpenOptionsExt;
        let mut reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .expect("reader");
        let mut w = create_in_place(&fifo).expect("has a reader");
        w.write_all(b"line\n").expect("write");
        drop(w);
        let mut got = String::new();
        reader.read_to_string(&mut got).expect("read");
        assert_eq!(got, "line\n");
        assert!(fifo.exists(), "the FIFO is still a FIFO");

        // Checked first (before a run's work), then written: one stream,
        // not two (the check's open is the one written to, so the reader
        // sees no end of stream in between).
        let mut reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .expect("reader");
        assert_eq!(check_output(&fifo), Ok(Target::Through));
        let mut buf = [0u8; 8];
        assert_eq!(
            reader.read(&mut buf).map_err(|e| e.kind()),
            Err(io::ErrorKind::WouldBlock),
            "a writer is still there: no end of stream"
        );
        let mut w = create_in_place(&fifo).expect("the held stream");
        w.write_all(b"two\n").expect("write");
        drop(w);
        let mut got = String::new();
        reader.read_to_string(&mut got).expect("read");
        assert_eq!(got, "two\n");
    }
}
