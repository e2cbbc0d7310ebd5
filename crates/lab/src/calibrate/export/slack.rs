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

use super::Reading;
use super::raw::{self, RawMsg, User};
use std::path::{Path, PathBuf};

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
    r.message(id, t_us, &author, None, bot, false, parent)?;
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

/// A folder's day files, in name (date) order.
fn days(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter(|e| is_day(&e.file_name().to_string_lossy()))
        .map(|e| e.path())
        .collect();
    out.sort();
    Ok(out)
}

/// The channel folder to read in the export at `dir`: `dir` itself when
/// it holds day files, else `channel`, else the folder whose day files
/// are largest in all (on a tie the first by name).
pub(super) fn channel_folder(dir: &Path, channel: Option<&str>) -> Result<PathBuf, String> {
    if channel.is_none() && !days(dir)?.is_empty() {
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
        let bytes: u64 = days(&f)?
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
    let folder = channel_folder(dir, channel)?;
    let files = days(&folder)?;
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
            let Some(id) = u.id else {
                return Ok(());
            };
            if u.is_bot == Some(true) {
                r.mark_bot(&id);
            }
            let names = [u.name, u.real_name].into_iter().flatten();
            for n in names.chain(u.profile.into_iter().flat_map(raw::Profile::names)) {
                r.alias(&id, n);
            }
            Ok(())
        })
        .map_err(|e| e.replace(" no \"messages\"", " no users"))?;
    }
    Ok(folder
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "slack".into()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn day_files_are_told_by_name() {
        assert!(super::is_day("2024-01-31.json"));
        assert!(!super::is_day("users.json"));
        assert!(!super::is_day("2024-1-31.json"));
    }
}
