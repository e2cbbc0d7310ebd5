//! Calibrating from a chat platform's export (docs/exports.md): Slack's
//! workspace export, DiscordChatExporter's JSON, Matrix room events.
//!
//! An export is read into the channel's messages ([`Reading`]), each
//! message's role decided ([`map`]: question, answer, bot-to-bot reply),
//! and the result handed to calibrate as a [`Log`] of the channel's
//! messages, so that the existing fit runs unchanged (as under policy
//! `none`: an export has no claims). Before the fit, "your channel
//! today" ([`channel`]) is measured from the same roles.
//!
//! Privacy: message texts are skipped by the parser and never kept or
//! written; authors are written as their platform ids, or hashed
//! (`--hash-authors`), never with their display names then.

pub mod channel;
pub mod discord;
pub mod matrix;
pub mod raw;
pub mod slack;

use super::read::{Clock, Event, Format, Log, Skipped, What};
use super::{Extra, Finished, Options};
use crate::error::Error;
use crate::progress::Observer;
use raw::RawMsg;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::AtomicBool;

/// The platforms read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    Slack,
    Discord,
    Matrix,
}

impl Platform {
    pub fn name(self) -> &'static str {
        match self {
            Platform::Slack => "Slack",
            Platform::Discord => "Discord",
            Platform::Matrix => "Matrix",
        }
    }

    /// The platform a message's fields are of.
    fn of(m: &RawMsg) -> Option<Platform> {
        if m.event_id.is_some() || m.origin_server_ts.is_some() || m.sender.is_some() {
            Some(Platform::Matrix)
        } else if m.author.is_some() || m.timestamp.is_some() {
            Some(Platform::Discord)
        } else if m.ts.is_some() || m.subtype.is_some() {
            Some(Platform::Slack)
        } else {
            None
        }
    }
}

impl FromStr for Platform {
    type Err = String;
    fn from_str(s: &str) -> Result<Platform, String> {
        match s {
            "slack" => Ok(Platform::Slack),
            "discord" => Ok(Platform::Discord),
            "matrix" => Ok(Platform::Matrix),
            _ => Err(format!(
                "--format {s}: expected log (a frame log), slack, discord or matrix"
            )),
        }
    }
}

/// What a bot's message outside any thread (no reply, no reference)
/// answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unthreaded {
    /// The latest human message, when that is a question: a bot's message
    /// before the next human one answers it.
    NextHuman,
    /// Nothing: only replies answer.
    Ignore,
}

impl FromStr for Unthreaded {
    type Err = String;
    fn from_str(s: &str) -> Result<Unthreaded, String> {
        match s {
            "next-human" => Ok(Unthreaded::NextHuman),
            "ignore" => Ok(Unthreaded::Ignore),
            _ => Err(format!(
                "--unthreaded {s}: expected next-human (a bot's message before the next human \
                 one answers the question before it) or ignore (only replies answer)"
            )),
        }
    }
}

/// How an export is read.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The platform (None: told by the messages' fields).
    pub format: Option<Platform>,
    /// Authors (ids or names) read as humans whatever the platform says.
    pub humans: Vec<String>,
    /// Authors (ids or names) read as bots whatever the platform says.
    pub bots: Vec<String>,
    pub unthreaded: Unthreaded,
    /// Author ids hashed in every output.
    pub hash_authors: bool,
    /// The window read (`--since`, inclusive; `--until`, exclusive), µs
    /// since 1970: messages outside it are left out.
    pub since_us: Option<i64>,
    pub until_us: Option<i64>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            format: None,
            humans: Vec::new(),
            bots: Vec::new(),
            unthreaded: Unthreaded::NextHuman,
            hash_authors: false,
            since_us: None,
            until_us: None,
        }
    }
}

/// What calibrate is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// A frame log (observe's, a recording, a live trace).
    Log,
    /// An export, of the platform `--format` names (None: told by its
    /// messages).
    Export(Option<Platform>),
}

/// What `path` is: `format` (`--format`) says so, else a folder is an
/// export (Slack's), and so is a zip (Slack's, as Slack delivers it), and
/// a file whose first character is `[`, or `{` with a first key no frame
/// log starts with (a gzipped file told by what it holds; a UTF-8 byte
/// order mark skipped).
pub fn input(path: &Path, format: Option<&str>) -> Result<Input, Error> {
    match format {
        Some("log") => return Ok(Input::Log),
        Some(f) => {
            return Platform::from_str(f)
                .map(|p| Input::Export(Some(p)))
                .map_err(Error::bad);
        }
        None => {}
    }
    if path.is_dir() {
        return Ok(Input::Export(Some(Platform::Slack)));
    }
    if slack::is_zip(path) {
        return Ok(Input::Export(Some(Platform::Slack)));
    }
    let head = match head(path) {
        Some(h) => h,
        // The frame log reader says what is wrong with it.
        None => return Ok(Input::Log),
    };
    let text = String::from_utf8_lossy(&head);
    let text = text.trim_start_matches('\u{feff}').trim_start();
    if text.starts_with('[') {
        return Ok(Input::Export(None));
    }
    // observe's header line, whose keys may come in name order
    // (`channel` first).
    if text
        .lines()
        .next()
        .unwrap_or("")
        .contains("\"herdsim_observe\"")
    {
        return Ok(Input::Log);
    }
    let first_key = text
        .strip_prefix('{')
        .map(str::trim_start)
        .and_then(|t| t.strip_prefix('"'))
        .and_then(|t| t.split('"').next());
    Ok(match first_key {
        Some(
            "guild" | "channel" | "messages" | "chunk" | "events" | "room_name" | "room_id"
            | "room_creator" | "export_date" | "exported_by" | "start" | "end",
        ) => Input::Export(None),
        _ => Input::Log,
    })
}

/// The first 4 KiB of the file at `path`, decompressed when it is
/// gzipped.
fn head(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let f = std::io::BufReader::new(crate::files::open_input(path).ok()?);
    let (r, _) = super::read::ungzipped(f).ok()?;
    let mut out = Vec::with_capacity(4096);
    // A cut or corrupt stream: what was read so far tells.
    let _ = r.take(4096).read_to_end(&mut out);
    Some(out)
}

/// The export's settings from calibrate's flags, or None when `log` is
/// a frame log (the export flags then refused if given).
pub fn settings(
    log: &Path,
    format: Option<&str>,
    humans: &[String],
    bots: &[String],
    unthreaded: &str,
    hash_authors: bool,
    window: (Option<i64>, Option<i64>),
) -> Result<Option<Settings>, Error> {
    let unthreaded = Unthreaded::from_str(unthreaded).map_err(Error::bad)?;
    match input(log, format)? {
        Input::Export(format) => Ok(Some(Settings {
            format,
            humans: humans.to_vec(),
            bots: bots.to_vec(),
            unthreaded,
            hash_authors,
            since_us: window.0,
            until_us: window.1,
        })),
        Input::Log => {
            let given = [
                (!humans.is_empty(), "--humans"),
                (!bots.is_empty(), "--bots"),
                (unthreaded != Unthreaded::NextHuman, "--unthreaded"),
                (hash_authors, "--hash-authors"),
                (window.0.is_some(), "--since"),
                (window.1.is_some(), "--until"),
            ];
            match given.iter().find(|(g, _)| *g) {
                Some((_, flag)) => Err(Error::bad(format!(
                    "{flag}: {} is a frame log, not a chat export (give --format slack, discord \
                     or matrix if it is one)",
                    log.display()
                ))),
                None => Ok(None),
            }
        }
    }
}

/// What was left out of an export, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub edits: u64,
    pub deleted: u64,
    pub joins: u64,
    pub system: u64,
    pub encrypted: u64,
    /// Replies stamped before the message they reply to, by at most
    /// [`EARLY_US`] (read as at its time), and by more (left as stamped).
    pub early: u64,
    pub too_early: u64,
    /// Messages outside `--since`/`--until`.
    pub outside: u64,
    /// Messages whose id an earlier one has (read once).
    pub repeated: u64,
}

/// How far before the message it replies to a reply may be stamped and
/// still be read as its reply, µs: the servers of a federated room
/// (Matrix) stamp with their own clocks, a few seconds apart. Such a reply
/// is read as at its parent's time (a TTFR of 0).
pub const EARLY_US: i64 = 5_000_000;

/// Replies stamped up to [`EARLY_US`] before their parent are moved to
/// its time; returns how many moved and how many are earlier still.
fn clamp_early(msgs: &mut [Msg]) -> (u64, u64) {
    let moves: Vec<(usize, i64)> = {
        let at: HashMap<&str, i64> = msgs.iter().map(|m| (m.id.as_str(), m.t_us)).collect();
        msgs.iter()
            .enumerate()
            .filter_map(|(i, m)| {
                let p = *at.get(m.parent.as_deref()?)?;
                (m.t_us < p).then_some((i, p))
            })
            .collect()
    };
    let (mut early, mut too_early) = (0, 0);
    for (i, p) in moves {
        if p - msgs[i].t_us <= EARLY_US {
            msgs[i].t_us = p;
            early += 1;
        } else {
            too_early += 1;
        }
    }
    (early, too_early)
}

/// The most messages read from one export (inside the window): what the
/// fit holds of each (about 0.35 KB) keeps calibrate within 3 GB of
/// address space (docs/exports.md, "Bounds").
pub const MAX_MESSAGES: usize = 4_000_000;

/// A message read: its id, time (µs since 1970), author (an index),
/// and the message it replies to (a thread's first message, a reply's
/// reference).
#[derive(Debug, Clone)]
pub struct Msg {
    pub id: String,
    pub t_us: i64,
    pub author: u32,
    pub parent: Option<String>,
    /// The user ids it mentions (its text is not kept).
    pub mentions: Box<[String]>,
}

/// An export being read.
#[derive(Debug, Default)]
pub struct Reading {
    pub platform: Option<Platform>,
    pub msgs: Vec<Msg>,
    /// Authors, by index: id, display name, bot by the platform, sent an
    /// `m.notice`.
    pub authors: Vec<(String, Option<String>, bool, bool)>,
    /// Other names of an author, by index (Slack's profiles and
    /// `users.json`): matched by `--humans`/`--bots`, never written.
    pub aliases: Vec<Vec<String>>,
    index: HashMap<String, u32>,
    redacted: HashSet<String>,
    pub counts: Counts,
    text_bytes: usize,
    /// The window read (µs since 1970; `until` exclusive).
    pub since_us: Option<i64>,
    pub until_us: Option<i64>,
}

impl Reading {
    pub fn new(platform: Option<Platform>) -> Reading {
        Reading {
            platform,
            ..Reading::default()
        }
    }

    /// One message or event of the export.
    pub fn add(&mut self, m: RawMsg) -> Result<(), String> {
        let p = match (self.platform, Platform::of(&m)) {
            (Some(x), Some(y)) if x != y => {
                return Err(format!(
                    "a {} message in a {} export (its fields are {}'s)",
                    y.name(),
                    x.name(),
                    y.name()
                ));
            }
            (Some(x), _) => x,
            (None, Some(y)) => {
                self.platform = Some(y);
                y
            }
            (None, None) => {
                return Err(
                    "a message of none of the formats calibrate reads (no `ts`, \
                            `timestamp` nor `origin_server_ts`)"
                        .into(),
                );
            }
        };
        match p {
            Platform::Slack => slack::add(m, self),
            Platform::Discord => discord::add(m, self),
            Platform::Matrix => matrix::add(m, self),
        }
    }

    /// A message, checked against the bounds.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn message(
        &mut self,
        id: String,
        t_us: i64,
        author: &str,
        name: Option<String>,
        bot: bool,
        notice: bool,
        parent: Option<String>,
        mentions: Vec<String>,
    ) -> Result<(), String> {
        if self.since_us.is_some_and(|s| t_us < s) || self.until_us.is_some_and(|u| t_us >= u) {
            self.counts.outside += 1;
            return Ok(());
        }
        if self.msgs.len() >= MAX_MESSAGES {
            return Err(format!(
                "more than {MAX_MESSAGES} messages: calibrate a part of the export (--since, \
                 --until)"
            ));
        }
        self.text_bytes += id.len()
            + parent.as_ref().map_or(0, String::len)
            + mentions.iter().map(String::len).sum::<usize>();
        let a = match self.index.get(author) {
            Some(&a) => a,
            None => {
                let a = self.authors.len() as u32;
                self.text_bytes += 2 * author.len() + name.as_ref().map_or(0, String::len);
                self.index.insert(author.to_string(), a);
                self.authors.push((author.to_string(), None, false, false));
                a
            }
        };
        let entry = &mut self.authors[a as usize];
        entry.2 |= bot;
        entry.3 |= notice;
        if entry.1.is_none() {
            entry.1 = name;
        }
        if self.text_bytes > super::read::MAX_TEXT_BYTES {
            return Err(format!(
                "the ids kept pass {} MiB: calibrate a part of the export (--since, --until)",
                super::read::MAX_TEXT_BYTES >> 20
            ));
        }
        self.msgs.push(Msg {
            id,
            t_us,
            author: a,
            parent,
            mentions: mentions.into_boxed_slice(),
        });
        Ok(())
    }

    /// An author the platform marks a bot elsewhere (Slack's users.json).
    pub(crate) fn mark_bot(&mut self, id: &str) {
        if let Some(&a) = self.index.get(id) {
            self.authors[a as usize].2 = true;
        }
    }

    /// Another name of the author `id` (one already read), for the flags.
    pub(crate) fn alias(&mut self, id: &str, name: String) {
        let Some(&a) = self.index.get(id) else {
            return;
        };
        let a = a as usize;
        if self.aliases.len() <= a {
            self.aliases.resize(a + 1, Vec::new());
        }
        if name != id && !self.aliases[a].contains(&name) {
            self.text_bytes += name.len();
            self.aliases[a].push(name);
        }
    }

    /// A message deleted by a later event.
    pub(crate) fn redact(&mut self, id: String) {
        self.redacted.insert(id);
    }
}

/// Read the export at `path`: a Slack export's folder (or one channel's
/// folder), or one file. Returns the reading and the channel's name.
pub fn read(path: &Path, channel: Option<&str>, s: &Settings) -> Result<(Reading, String), String> {
    let format = s.format;
    let mut r = Reading::new(format);
    r.since_us = s.since_us;
    r.until_us = s.until_us;
    let limit = super::read::MAX_LOG_BYTES;
    let name = if path.is_dir() {
        if format.is_some_and(|f| f != Platform::Slack) {
            return Err(format!(
                "{}: a folder, and only Slack exports are folders: give the export's file",
                path.display()
            ));
        }
        r.platform = Some(Platform::Slack);
        slack::read(path, channel, limit, &mut r)?
    } else if slack::is_zip(path) {
        if format.is_some_and(|f| f != Platform::Slack) {
            return Err(format!(
                "{}: a zip, and only Slack exports are zips: give the export's file",
                path.display()
            ));
        }
        r.platform = Some(Platform::Slack);
        slack::read_zip(path, channel, limit, slack::MAX_ZIP_ENTRIES, &mut r)?
    } else {
        raw::each(path, limit, |m: RawMsg| r.add(m))?;
        let file = path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let stem = [".gz", ".json"]
            .iter()
            .fold(file.as_str(), |f, ext| f.strip_suffix(ext).unwrap_or(f))
            .to_string();
        if stem.is_empty() {
            "export".into()
        } else {
            stem
        }
    };
    if r.msgs.is_empty() {
        return Err(if r.counts.outside > 0 {
            format!(
                "{}: no message between --since and --until ({} outside)",
                path.display(),
                r.counts.outside
            )
        } else {
            format!("{}: no message in the export", path.display())
        });
    }
    Ok((r, name))
}

/// An author's id in the outputs: hashed (SHA-256, the first 12 hex
/// digits after `a`) when asked.
pub fn author_id(id: &str, hash: bool) -> String {
    if !hash {
        return id.to_string();
    }
    let d = Sha256::digest(id.as_bytes());
    let mut s = String::from("a");
    for b in &d[..6] {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// What a message is to the channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A human's message that replies to nothing.
    Question,
    /// A human's reply (a follow-up): not read.
    HumanReply,
    /// A bot's reply to a question (the question's index).
    Answer(usize),
    /// A bot's reply to a bot's message (its index).
    BotReply(usize),
    /// A bot's reply to a human's reply.
    ToHumanReply,
    /// A bot's reply to a message not in the export.
    Orphan,
    /// A bot's message that answers nothing (outside threads under
    /// `--unthreaded ignore`, or before any question).
    BotPost,
}

/// The export mapped: messages in time order with their roles.
#[derive(Debug)]
pub struct Mapped {
    pub msgs: Vec<Msg>,
    pub roles: Vec<Role>,
    /// Authors read as bots, by author index.
    pub bot: Vec<bool>,
    pub counts: Counts,
    pub platform: Platform,
    /// Authors: id, display name, bot by the platform, sent an `m.notice`.
    pub authors: Vec<(String, Option<String>, bool, bool)>,
}

/// Decide every message's role (docs/exports.md, "Who asks, who answers").
pub fn map(r: Reading, s: &Settings) -> Mapped {
    let Reading {
        platform,
        mut msgs,
        authors,
        aliases,
        redacted,
        mut counts,
        ..
    } = r;
    if !redacted.is_empty() {
        let before = msgs.len();
        msgs.retain(|m| !redacted.contains(&m.id));
        counts.deleted += (before - msgs.len()) as u64;
    }
    msgs.sort_by_key(|m| m.t_us);
    // A message id read twice (a day file exported twice, an export
    // joined to another): the first in time counts, once.
    let first: Vec<bool> = {
        let mut seen: HashSet<&str> = HashSet::with_capacity(msgs.len());
        msgs.iter().map(|m| seen.insert(m.id.as_str())).collect()
    };
    if first.iter().any(|f| !f) {
        let before = msgs.len();
        let mut keep = first.iter();
        msgs.retain(|_| keep.next().copied().unwrap_or(true));
        counts.repeated += (before - msgs.len()) as u64;
    }
    drop(first);
    (counts.early, counts.too_early) = clamp_early(&mut msgs);
    // A reply moved to its parent's time sorts after it.
    msgs.sort_by_key(|m| (m.t_us, m.parent.is_some()));
    let no_alias: Vec<String> = Vec::new();
    let listed = |list: &[String], a: usize, id: &str, name: &Option<String>| {
        let other = aliases.get(a).unwrap_or(&no_alias);
        list.iter()
            .any(|x| x == id || name.as_deref() == Some(x.as_str()) || other.contains(x))
    };
    let bot: Vec<bool> = authors
        .iter()
        .enumerate()
        .map(|(a, (id, name, flag, notice))| {
            (*flag || *notice || listed(&s.bots, a, id, name)) && !listed(&s.humans, a, id, name)
        })
        .collect();
    drop(aliases);
    let at: HashMap<&str, usize> = msgs
        .iter()
        .enumerate()
        .map(|(i, m)| (m.id.as_str(), i))
        .collect();
    let mut roles = vec![Role::BotPost; msgs.len()];
    let mut last_human: Option<usize> = None;
    for (i, m) in msgs.iter().enumerate() {
        let parent = m.parent.as_deref().map(|p| at.get(p).copied());
        roles[i] = if !bot[m.author as usize] {
            match parent {
                None => {
                    last_human = Some(i);
                    Role::Question
                }
                Some(_) => {
                    last_human = None;
                    Role::HumanReply
                }
            }
        } else {
            let to = match parent {
                Some(p) => p.ok_or(Role::Orphan),
                None => match (s.unthreaded, last_human) {
                    (Unthreaded::NextHuman, Some(q)) => Ok(q),
                    _ => Err(Role::BotPost),
                },
            };
            match to {
                Err(role) => role,
                Ok(p) => match roles[p] {
                    Role::Question => Role::Answer(p),
                    Role::HumanReply => Role::ToHumanReply,
                    _ if bot[msgs[p].author as usize] => Role::BotReply(p),
                    _ => Role::ToHumanReply,
                },
            }
        };
    }
    drop(at);
    Mapped {
        msgs,
        roles,
        bot,
        counts,
        platform: platform.unwrap_or(Platform::Slack),
        authors,
    }
}

/// The channel's log for calibrate: its questions (human messages that
/// reply to nothing) and their answers (bots' replies to them), at ms
/// since the first message at or after `from_us`; bots' replies to bots'
/// answers follow as replies to those (cascades), so calibrate counts
/// them. A question mentions an agent when one of its mentions is a bot's
/// id. Messages before `from_us`, and replies to them, are left out.
pub fn to_log(m: &Mapped, s: &Settings, path: &Path, channel: &str, from_us: i64) -> Log {
    let t0 = m
        .msgs
        .iter()
        .map(|x| x.t_us)
        .find(|&t| t >= from_us)
        .unwrap_or(from_us);
    let ms = |t_us: i64| (t_us - t0) as f64 / 1000.0;
    let end = m.msgs.last().map_or(0.0, |x| ms(x.t_us));
    let ids: Vec<String> = m
        .authors
        .iter()
        .map(|(id, ..)| author_id(id, s.hash_authors))
        .collect();
    let mut names = BTreeMap::new();
    if !s.hash_authors {
        for (id, name, ..) in &m.authors {
            if let Some(n) = name {
                names.insert(id.clone(), n.clone());
            }
        }
    }
    let bots: HashSet<&str> = m
        .authors
        .iter()
        .zip(&m.bot)
        .filter(|(_, b)| **b)
        .map(|((id, ..), _)| id.as_str())
        .collect();
    let mut events = Vec::new();
    let mut read = 0u64;
    for (x, role) in m.msgs.iter().zip(&m.roles) {
        if x.t_us < from_us {
            continue;
        }
        read += 1;
        let reply_to = match role {
            Role::Question => None,
            Role::Answer(p) | Role::BotReply(p) if m.msgs[*p].t_us >= from_us => {
                Some(m.msgs[*p].id.clone())
            }
            _ => continue,
        };
        let mention =
            *role == Role::Question && x.mentions.iter().any(|id| bots.contains(id.as_str()));
        events.push(Event {
            t: ms(x.t_us),
            what: What::Msg {
                id: x.id.clone(),
                from: ids[x.author as usize].clone(),
                reply_to,
                mention,
            },
        });
    }
    Log {
        path: path.to_path_buf(),
        format: Format::Export,
        clock: Clock::Server,
        channel: channel.to_string(),
        events,
        names,
        observer: Default::default(),
        url: None,
        rtt_ms: Vec::new(),
        start_t: 0.0,
        end_t: end,
        end_reason: None,
        skipped: Skipped::default(),
        frames: read,
        connections: 0,
        cut_last_line: false,
        time_field: Some(match m.platform {
            Platform::Slack => "each message's `ts` (Slack's seconds)",
            Platform::Discord => "each message's `timestamp` (Discord's, ISO 8601)",
            Platform::Matrix => "each event's `origin_server_ts` (Matrix's ms)",
        }),
    }
}

/// The part of an export the scenario is fitted on, when not all of it.
#[derive(Debug, Clone, PartialEq)]
pub struct FitWindow {
    /// Its first instant, µs since 1970.
    pub from_us: i64,
    /// What the report says of it.
    pub note: String,
}

/// Days in µs, for the report.
fn days(us: i64) -> String {
    format!("{:.1} days", us as f64 / 86_400e6)
}

/// The part of the channel the fit is over: all of it when it is no
/// longer than a scenario holds (`limits::MAX_DURATION_MS`); else, with
/// no `--since`/`--until`, its last such span (the channel today is
/// measured over all of it, which needs no scenario); a window the flags
/// chose that is still too long is refused.
pub fn fit_window(m: &Mapped, s: &Settings) -> Result<Option<FitWindow>, String> {
    let (Some(first), Some(last)) = (m.msgs.first(), m.msgs.last()) else {
        return Ok(None);
    };
    let max = crate::limits::MAX_DURATION_US as i64;
    let span = last.t_us - first.t_us;
    if span <= max {
        return Ok(None);
    }
    if s.since_us.is_some() || s.until_us.is_some() {
        return Err(format!(
            "the messages between --since and --until run {} ({} to {}), longer than the \
             longest duration a scenario holds ({}): give a shorter window",
            days(span),
            discord::utc(first.t_us),
            discord::utc(last.t_us),
            days(max)
        ));
    }
    let from_us = last.t_us - max;
    let start = m
        .msgs
        .iter()
        .map(|x| x.t_us)
        .find(|&t| t >= from_us)
        .unwrap_or(from_us);
    Ok(Some(FitWindow {
        from_us,
        note: format!(
            "  The export runs {} ({} to {}), longer than a scenario holds\n    ({}): the \
             figures above are over all of it; the fit, the what-if and the\n    prediction \
             below over its last {} ({} on). --since and --until\n    (YYYY-MM-DD or RFC \
             3339, UTC) pick another window.\n",
            days(span),
            discord::utc(first.t_us),
            discord::utc(last.t_us),
            days(max),
            days(max),
            discord::utc(start)
        ),
    }))
}

/// Calibrate from the export at `opts.log`: read, map, measure the
/// channel as it is, then calibrate's fit and outputs, with
/// `channel.csv` and the channel's figures before the report.
pub fn run(
    opts: &Options,
    s: &Settings,
    obs: &dyn Observer,
    stop: &AtomicBool,
) -> Result<Finished, Error> {
    super::refuse_own_output(opts)?;
    if opts.settings.speed != 1.0 {
        return Err(Error::bad(format!(
            "--speed {}: {} is a chat export, in real time; leave --speed out",
            opts.settings.speed,
            opts.log.display()
        )));
    }
    let (reading, name) = read(&opts.log, opts.channel.as_deref(), s).map_err(Error::bad)?;
    let mapped = map(reading, s);
    let today = channel::Today::of(&mapped);
    let mut preface = channel::text(&today, &mapped, &name);
    let from_us = match fit_window(&mapped, s) {
        Ok(w) => {
            if let Some(w) = &w {
                preface.push_str(&w.note);
            }
            w.map_or(i64::MIN, |w| w.from_us)
        }
        Err(m) => {
            return Err(Error::bad(format!("{}: {m}", opts.log.display())));
        }
    };
    let log = to_log(&mapped, s, &opts.log, &name, from_us);
    let extra = Extra {
        preface,
        files: vec![(channel::FILE.to_string(), channel::csv(&today))],
        whatif: true,
        warnings: channel::early_warnings(&mapped.counts),
    };
    // The messages are in `log` now: their strings freed before the fit.
    drop(mapped);
    drop(today);
    super::run_log(opts, log, extra, obs, stop)
}

#[cfg(test)]
mod tests {
    use super::Role::*;
    use super::*;

    /// A reading of (id, µs, author, bot, replies to).
    fn reading(msgs: &[(&str, i64, &str, bool, Option<&str>)]) -> Reading {
        let mut r = Reading::new(Some(Platform::Discord));
        for (id, t, who, bot, parent) in msgs {
            r.message(
                id.to_string(),
                *t,
                who,
                None,
                *bot,
                false,
                parent.map(str::to_string),
                Vec::new(),
            )
            .expect("a message");
        }
        r
    }

    const CHANNEL: [(&str, i64, &str, bool, Option<&str>); 7] = [
        ("q1", 0, "h", false, None),
        ("a1", 1, "b1", true, None),
        ("a2", 2, "b2", true, Some("a1")),
        ("r1", 3, "h", false, Some("a1")),
        ("a3", 4, "b1", true, None),
        ("a4", 5, "b2", true, Some("gone")),
        ("a5", 6, "b1", true, Some("r1")),
    ];

    #[test]
    fn every_message_gets_its_role() {
        let m = map(reading(&CHANNEL), &Settings::default());
        // a1 answers q1 (no human spoke since), a2 replies to a bot, the
        // human's reply ends q1's turn so a3 answers nothing.
        assert_eq!(
            m.roles,
            [
                Question,
                Answer(0),
                BotReply(1),
                HumanReply,
                BotPost,
                Orphan,
                ToHumanReply
            ]
        );
        let ignore = Settings {
            unthreaded: Unthreaded::Ignore,
            ..Settings::default()
        };
        let m = map(reading(&CHANNEL), &ignore);
        assert_eq!(&m.roles[..3], [Question, BotPost, BotReply(1)]);
        // b2 read as a human: its reply to a bot is a human's reply.
        let humans = Settings {
            humans: vec!["b2".into()],
            ..Settings::default()
        };
        let m = map(reading(&CHANNEL), &humans);
        assert_eq!(&m.roles[..3], [Question, Answer(0), HumanReply]);
        assert_eq!(m.bot, [false, true, false]);
    }

    #[test]
    fn a_redacted_message_is_left_out_and_its_replies_are_orphans() {
        let mut r = reading(&CHANNEL);
        r.redact("a1".into());
        let m = map(r, &Settings::default());
        assert_eq!(m.counts.deleted, 1);
        assert_eq!(m.msgs.len(), 6);
        assert_eq!(&m.roles[..3], [Question, Orphan, HumanReply]);
    }

    #[test]
    fn frame_logs_are_not_taken_for_exports() {
        let tmp = tempfile::tempdir().expect("tmp");
        let is = |text: &str| {
            let p = tmp.path().join("x");
            std::fs::write(&p, text).expect("write");
            input(&p, None).expect("input")
        };
        // observe's header with its keys in name order, a recording, a trace.
        for log in [
            "{\"channel\":\"#general\",\"herdsim_observe\":1,\"id\":\"x\"}\n",
            "{\"ms\": 0.0, \"conn\": 0, \"dir\": \"up\", \"frame\": \"{}\"}\n",
            "{\"ev\":\"post\",\"from\":\"operator\",\"t_us\":1}\n",
        ] {
            assert_eq!(is(log), Input::Log, "{log}");
        }
        for export in [
            "{\"guild\": {}, \"messages\": []}",
            "[{\"ts\": \"1.0\"}]",
            "{\"chunk\": []}",
            "{\"room_name\": \"x\", \"messages\": []}",
            // DiscordChatExporter's keys in name order.
            "{\"channel\": {}, \"guild\": {}, \"messages\": []}",
        ] {
            assert_eq!(is(export), Input::Export(None), "{export}");
        }
        assert_eq!(is("[]"), Input::Export(None));
        let dir = tmp.path().join("d");
        std::fs::create_dir_all(&dir).expect("mkdir");
        assert_eq!(
            input(&dir, None).ok(),
            Some(Input::Export(Some(Platform::Slack)))
        );
        assert_eq!(input(&dir, Some("log")).ok(), Some(Input::Log));
    }

    #[test]
    fn hashed_authors_are_stable_and_short() {
        assert_eq!(author_id("U0ALICE", false), "U0ALICE");
        let h = author_id("U0ALICE", true);
        assert_eq!(h, author_id("U0ALICE", true));
        assert_ne!(h, author_id("U0BOB", true));
        assert_eq!(h.len(), 13);
        assert!(h.starts_with('a'));
    }
}
