//! Slack's workspace export (<https://slack.com/help/articles/220556107>):
//! a folder per channel, a JSON file per day (an array of messages with
//! `ts`, `user` or `bot_id`, `thread_ts`, `subtype`), and `users.json`
//! (`id`, `is_bot`) beside the folders.
//!
//! A message's id is its `ts`; a reply in a thread has a `thread_ts`
//! other than its own `ts` and replies to the thread's first message.
//! A bot: a message with a `bot_id` or subtype `bot_message`, or by a
//! user `users.json` marks `is_bot`. Edits: a message with `edited`
//! counts once, at its `ts`; a `message_changed` record is left out.
//! Subtypes: `message_deleted`
//! and `tombstone` (deleted: left out), `channel_join`/`channel_leave`
//! (joins), any other subtype but `thread_broadcast`, `me_message`,
//! `file_share` and `bot_message`: a system message, left out.
//!
//! The export is read as Slack delivers it (a `.zip` of the workspace
//! folder, read in place: deflated or stored entries, at most
//! [`MAX_ZIP_ENTRIES`] and the export's bytes once decompressed) or
//! unpacked. A day file that is a symbolic link is read when it leads to a
//! file inside the export and refused otherwise; a zip's symbolic links
//! are refused.

use super::Reading;
use super::raw::{self, RawMsg, User};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The most entries a zipped export may have (a 16-channel workspace's
/// 14 months are about 7 000 day files).
pub const MAX_ZIP_ENTRIES: usize = 1_000_000;

/// A message of Slack's into the reading.
pub(super) fn add(m: RawMsg, r: &mut Reading) -> Result<(), String> {
    match m.subtype.as_deref() {
        None | Some("bot_message" | "thread_broadcast" | "me_message" | "file_share") => {}
        Some("message_changed") => {
            r.counts.edits += 1;
            return Ok(());
        }
        Some("message_deleted" | "tombstone") => {
            r.counts.deleted += 1;
            return Ok(());
        }
        Some("channel_join" | "channel_leave" | "group_join" | "group_leave") => {
            r.counts.joins += 1;
            return Ok(());
        }
        Some(_) => {
            r.counts.system += 1;
            return Ok(());
        }
    }
    let (id, t_us) =
        m.ts.as_ref()
            .and_then(raw::Stamp::parse)
            .ok_or("a Slack message without a `ts` of seconds")?;
    let bot = m.bot_id.is_some() || m.subtype.as_deref() == Some("bot_message");
    // Names the flags may use: the profiles' and `username`.
    let mut names: Vec<String> = Vec::new();
    for p in [m.user_profile, m.bot_profile].into_iter().flatten() {
        names.extend(p.names());
    }
    let mentions = m.text.map(|t| t.0).unwrap_or_default();
    let author = match (m.user, m.bot_id, m.username) {
        (Some(u), _, n) | (None, Some(u), n) => {
            names.extend(n);
            u
        }
        (None, None, Some(n)) => n,
        (None, None, None) => {
            return Err("a Slack message without `user`, `bot_id` or `username`".into());
        }
    };
    let parent = match m.thread_ts.as_ref().map(raw::Stamp::parse) {
        Some(Some((root, _))) => (root != id).then_some(root),
        Some(None) => return Err("a Slack message whose `thread_ts` is not seconds".into()),
        None => None,
    };
    if m.edited.is_some() {
        r.counts.edits += 1;
    }
    r.message(id, t_us, &author, None, bot, false, parent, mentions)?;
    for n in names {
        r.alias(&author, n);
    }
    Ok(())
}

/// Whether `name` is a day file (`YYYY-MM-DD.json`).
fn is_day(name: &str) -> bool {
    name.strip_suffix(".json").is_some_and(|d| {
        d.len() == 10
            && d.bytes().enumerate().all(|(i, b)| match i {
                4 | 7 => b == b'-',
                _ => b.is_ascii_digit(),
            })
    })
}

/// A folder's day files, in name (date) order. A day file that is a
/// symbolic link is one when it leads to a file inside `root` (the
/// export's folder, canonical), and refused otherwise: never skipped.
fn days(dir: &Path, root: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
    {
        if !is_day(&e.file_name().to_string_lossy()) {
            continue;
        }
        let Ok(t) = e.file_type() else {
            continue;
        };
        if t.is_file() {
            out.push(e.path());
        } else if t.is_symlink() {
            let p = e.path();
            match std::fs::canonicalize(&p) {
                Ok(to) if to.starts_with(root) && to.is_file() => out.push(p),
                Ok(to) => {
                    return Err(format!(
                        "{}: a symbolic link to {}, {}: calibrate reads only the export's own \
                         files (copy the day file in, or remove the link)",
                        p.display(),
                        to.display(),
                        if to.starts_with(root) {
                            "not a file"
                        } else {
                            "outside the export"
                        }
                    ));
                }
                Err(err) => {
                    return Err(format!(
                        "{}: a symbolic link that leads to no file ({err}): remove it or \
                         restore its day file",
                        p.display()
                    ));
                }
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The channel folder to read in the export at `dir`: `dir` itself when
/// it holds day files, else `channel`, else the folder whose day files
/// are largest in all (on a tie the first by name).
pub(super) fn channel_folder(
    dir: &Path,
    root: &Path,
    channel: Option<&str>,
) -> Result<PathBuf, String> {
    if channel.is_none() && !days(dir, root)?.is_empty() {
        return Ok(dir.to_path_buf());
    }
    if let Some(c) = channel {
        let p = dir.join(c);
        if c.contains(['/', '\\']) || c.starts_with('.') || !p.is_dir() {
            return Err(format!(
                "{}: no channel folder {c:?} in this Slack export (--channel)",
                dir.display()
            ));
        }
        return Ok(p);
    }
    let mut best: Option<(u64, PathBuf)> = None;
    let mut folders: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    folders.sort();
    for f in folders {
        let bytes: u64 = days(&f, root)?
            .iter()
            .filter_map(|d| std::fs::metadata(d).ok())
            .map(|m| m.len())
            .sum();
        if bytes > 0 && best.as_ref().is_none_or(|(b, _)| bytes > *b) {
            best = Some((bytes, f));
        }
    }
    best.map(|(_, f)| f).ok_or_else(|| {
        format!(
            "{}: a folder without day files (YYYY-MM-DD.json) nor channel folders holding \
             them: not a Slack export",
            dir.display()
        )
    })
}

/// Read the Slack export at `dir`: its channel's day files, and the
/// users' bot flags from `users.json` where there is one.
pub(super) fn read(
    dir: &Path,
    channel: Option<&str>,
    limit: u64,
    r: &mut Reading,
) -> Result<String, String> {
    let root = std::fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let folder = channel_folder(dir, &root, channel)?;
    if !std::fs::canonicalize(&folder).is_ok_and(|f| f.starts_with(&root)) {
        return Err(format!(
            "{}: a symbolic link to a folder outside the export: calibrate reads only the \
             export's own files",
            folder.display()
        ));
    }
    let files = days(&folder, &root)?;
    let total: u64 = files
        .iter()
        .filter_map(|d| std::fs::metadata(d).ok())
        .map(|m| m.len())
        .sum();
    if total > limit {
        return Err(format!(
            "{}: {total} bytes of day files, more than the {limit} an export may hold: export \
             a shorter period",
            folder.display()
        ));
    }
    for f in &files {
        raw::each(f, limit, |m: RawMsg| r.add(m))?;
    }
    // users.json: beside the channel folders (the export's top).
    let top = if folder == dir {
        dir.parent().unwrap_or(dir)
    } else {
        dir
    };
    let users = top.join("users.json");
    if users.is_file() {
        raw::each(&users, limit, |u: User| {
            users_entry(u, r);
            Ok(())
        })
        .map_err(|e| e.replace(" no \"messages\"", " no users"))?;
    }
    Ok(folder
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "slack".into()))
}

/// Whether the file at `path` is a zip archive (by its first bytes).
pub(super) fn is_zip(path: &Path) -> bool {
    let mut head = [0u8; 4];
    crate::files::open_input(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .is_ok()
        && (head == *b"PK\x03\x04" || head == *b"PK\x05\x06")
}

/// One entry of a zipped export: its index, its folder and name (split at
/// the last `/`), its size as the archive declares it.
struct Entry {
    index: usize,
    folder: String,
    name: String,
    size: u64,
    link: bool,
}

/// Read the zipped Slack export at `path` as [`read`] reads its folder:
/// the channel's day files (the folder `channel` names, else the one whose
/// day files are largest), and `users.json` (the shallowest). At most
/// `max_entries` entries and `limit` bytes once decompressed, else it is
/// refused naming the file.
pub(super) fn read_zip(
    path: &Path,
    channel: Option<&str>,
    limit: u64,
    max_entries: usize,
    r: &mut Reading,
) -> Result<String, String> {
    let file = crate::files::open_input(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(|e| {
        format!(
            "{}: not a zip archive Slack's export reads as: {e}",
            path.display()
        )
    })?;
    if zip.len() > max_entries {
        return Err(format!(
            "{}: {} entries, more than the {max_entries} a zipped export may hold: unzip it \
             and give the channel's folder",
            path.display(),
            zip.len()
        ));
    }
    let mut entries = Vec::new();
    for index in 0..zip.len() {
        let e = zip
            .by_index_raw(index)
            .map_err(|e| format!("{}: entry {index}: {e}", path.display()))?;
        if e.is_dir() {
            continue;
        }
        let full = e
            .name()
            .map_err(|err| format!("{}: entry {index}: {err}", path.display()))?
            .into_owned();
        let (folder, name) = match full.rsplit_once('/') {
            Some((f, n)) => (f.to_string(), n.to_string()),
            None => (String::new(), full.clone()),
        };
        if is_day(&name) || name == "users.json" {
            entries.push(Entry {
                index,
                folder,
                name,
                size: e.size(),
                link: e.is_symlink(),
            });
        }
    }
    let last = |f: &str| f.rsplit('/').next().unwrap_or("").to_string();
    // Each folder's day-file bytes, in folder order (a map: a hostile zip
    // may hold a million entries, each in a folder of its own).
    let mut folders: BTreeMap<&str, u64> = BTreeMap::new();
    for e in entries.iter().filter(|e| is_day(&e.name)) {
        let n = folders.entry(e.folder.as_str()).or_insert(0);
        *n = n.saturating_add(e.size);
    }
    let chosen = match channel {
        Some(c) => folders
            .keys()
            .find(|f| last(f) == c)
            .map(|f| f.to_string())
            .ok_or_else(|| {
                format!(
                    "{}: no channel folder {:?} in this Slack export (--channel)",
                    path.display(),
                    raw::clip(c, 80)
                )
            })?,
        None => {
            // The largest; of equal ones, the first in folder order.
            let mut best: Option<(&str, u64)> = None;
            for (&f, &n) in &folders {
                if best.is_none_or(|b| n > b.1) {
                    best = Some((f, n));
                }
            }
            best.map(|(f, _)| f.to_string()).ok_or_else(|| {
                format!(
                    "{}: a zip without day files (YYYY-MM-DD.json): not a Slack export",
                    path.display()
                )
            })?
        }
    };
    let mut days: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.folder == chosen && is_day(&e.name))
        .collect();
    days.sort_by(|a, b| a.name.cmp(&b.name));
    let users = entries
        .iter()
        .filter(|e| e.name == "users.json")
        .min_by_key(|e| {
            (
                e.folder.matches('/').count() + usize::from(!e.folder.is_empty()),
                e.index,
            )
        });
    let mut used = 0u64;
    for e in &days {
        let (shown, file) = open_entry(&mut zip, e, path)?;
        used += raw::each_in(
            &shown,
            file,
            (limit.saturating_sub(used), limit),
            true,
            |m: RawMsg| r.add(m),
        )?;
    }
    if let Some(u) = users {
        let (shown, file) = open_entry(&mut zip, u, path)?;
        raw::each_in(
            &shown,
            file,
            (limit.saturating_sub(used), limit),
            true,
            |u: User| {
                users_entry(u, r);
                Ok(())
            },
        )
        .map_err(|e| e.replace(" no \"messages\"", " no users"))?;
    }
    Ok(if chosen.is_empty() {
        path.file_stem()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "slack".into())
    } else {
        last(&chosen)
    })
}

type Zip = zip::ZipArchive<std::io::BufReader<std::fs::File>>;

/// An entry of the zip at `path` opened to be read (decompressed), with
/// the path that names it in errors; a symbolic link is refused.
fn open_entry<'z>(
    zip: &'z mut Zip,
    e: &Entry,
    path: &Path,
) -> Result<
    (
        PathBuf,
        zip::read::ZipFile<'z, std::io::BufReader<std::fs::File>>,
    ),
    String,
> {
    let shown = path.join(if e.folder.is_empty() {
        e.name.clone()
    } else {
        format!("{}/{}", e.folder, e.name)
    });
    if e.link {
        return Err(format!(
            "{}: a symbolic link inside the zip: calibrate reads only the export's own files \
             (unzip it and give the folder)",
            shown.display()
        ));
    }
    let file = zip
        .by_index(e.index)
        .map_err(|err| format!("{}: {err}", shown.display()))?;
    Ok((shown, file))
}

/// A `users.json` entry into the reading: its bot flag and names.
fn users_entry(u: User, r: &mut Reading) {
    let Some(id) = u.id else {
        return;
    };
    if u.is_bot == Some(true) {
        r.mark_bot(&id);
    }
    let names = [u.name, u.real_name].into_iter().flatten();
    for n in names.chain(u.profile.into_iter().flat_map(raw::Profile::names)) {
        r.alias(&id, n);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn day_files_are_told_by_name() {
        assert!(super::is_day("2024-01-31.json"));
        assert!(!super::is_day("users.json"));
        assert!(!super::is_day("2024-1-31.json"));
    }

    /// A zip of `files` (name, text), deflated.
    fn zip_of(path: &std::path::Path, files: &[(&str, String)]) {
        use std::io::Write;
        let mut z = zip::ZipWriter::new(std::fs::File::create(path).expect("create"));
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (name, text) in files {
            z.start_file(*name, opts).expect("entry");
            z.write_all(text.as_bytes()).expect("write");
        }
        z.finish().expect("zip");
    }

    #[test]
    fn a_zip_is_read_within_its_bounds() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join("x.zip");
        let day = format!(
            "[{}{{\"ts\": \"1.5\", \"user\": \"U1\"}}]",
            " ".repeat(100_000)
        );
        zip_of(
            &p,
            &[
                ("top/general/2024-01-01.json", day.clone()),
                ("top/general/2024-01-02.json", day.clone()),
                ("top/users.json", "[]".into()),
            ],
        );
        assert!(super::is_zip(&p));
        let mut r = super::Reading::new(None);
        let name = super::read_zip(&p, None, 1 << 30, 10, &mut r);
        assert_eq!(name.ok().as_deref(), Some("general"));
        assert_eq!(r.msgs.len(), 2);
        // The bytes once decompressed, over both day files (a bomb).
        let mut r = super::Reading::new(None);
        let e = super::read_zip(&p, None, 150_000, 10, &mut r)
            .err()
            .unwrap_or_default();
        assert!(
            e.contains("x.zip/top/general/2024-01-02.json: more than 150000 bytes")
                && e.contains("once decompressed"),
            "{e}"
        );
        // The entries.
        let e = super::read_zip(&p, None, 1 << 30, 2, &mut r)
            .err()
            .unwrap_or_default();
        assert!(e.contains("x.zip: 3 entries, more than the 2"), "{e}");
    }
}
