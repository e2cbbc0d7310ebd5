//! One JSON file of an export read as a stream of messages: a top-level
//! array of messages (a Slack day file, a list of Matrix events), or an
//! object whose `messages`, `chunk` or `events` key holds them
//! (DiscordChatExporter, Element's and the client-server API's room
//! exports). Each message is deserialized on its own into [`RawMsg`],
//! which names only the fields calibrate reads: texts and everything
//! else are skipped by the parser, never kept.

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::cell::Cell;
use std::fmt;
use std::io::{BufRead, Read};
use std::path::Path;
use std::rc::Rc;

/// The keys of a top-level object that hold the messages.
pub const MESSAGE_KEYS: [&str; 3] = ["messages", "chunk", "events"];

/// The most bytes one message (or any other value of a file's top level)
/// may take: a platform's message is far smaller (Discord's text at most
/// 4 000 characters, Slack's 40 000, a Matrix event 64 KiB), and the
/// parser holds at most one string of it at a time.
pub const MAX_MESSAGE_BYTES: u64 = 4 << 20;

/// The most mentions read from one message (the first distinct ones).
pub const MAX_MENTIONS: usize = 64;

/// `s` for an error message: at most `n` characters, cut with `…`.
pub fn clip(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        None => s.to_string(),
        Some((i, _)) => format!("{}…", &s[..i]),
    }
}

/// A mention syntax: the user ids a text mentions.
pub trait Syntax {
    fn scan(text: &str, out: &mut Vec<String>);
}

fn push_id(out: &mut Vec<String>, id: &str) {
    if !id.is_empty() && out.len() < MAX_MENTIONS && !out.iter().any(|x| x == id) {
        out.push(id.to_string());
    }
}

/// Slack's `<@U0BBY38DM38>` (or `<@U0BBY38DM38|name>`) in `text`.
#[derive(Debug, Clone, Default)]
pub struct SlackSyntax;

impl Syntax for SlackSyntax {
    fn scan(text: &str, out: &mut Vec<String>) {
        for part in text.split("<@").skip(1) {
            let end = part.find(['>', '|']).unwrap_or(0);
            let id = &part[..end];
            if id.bytes().all(|b| b.is_ascii_alphanumeric()) {
                push_id(out, id);
            }
        }
    }
}

/// Discord's `<@123>` and `<@!123>` in `content`.
#[derive(Debug, Clone, Default)]
pub struct DiscordSyntax;

impl Syntax for DiscordSyntax {
    fn scan(text: &str, out: &mut Vec<String>) {
        for part in text.split("<@").skip(1) {
            let part = part.strip_prefix('!').unwrap_or(part);
            let end = part.find('>').unwrap_or(0);
            let id = &part[..end];
            if id.bytes().all(|b| b.is_ascii_digit()) {
                push_id(out, id);
            }
        }
    }
}

/// Matrix pills: `https://matrix.to/#/@user:server` links (the `@` and
/// `:` maybe percent-encoded) in `formatted_body`.
#[derive(Debug, Clone, Default)]
pub struct PillSyntax;

impl Syntax for PillSyntax {
    fn scan(text: &str, out: &mut Vec<String>) {
        for part in text.split("https://matrix.to/#/").skip(1) {
            let end = part
                .find(['"', '\'', '<', '>', '?', ' ', '/'])
                .unwrap_or(part.len());
            let id = part[..end]
                .replace("%40", "@")
                .replace("%3A", ":")
                .replace("%3a", ":");
            if id.starts_with('@') && id.contains(':') {
                push_id(out, &id);
            }
        }
    }
}

/// The user ids a text mentions in syntax `S`; the text itself is
/// dropped once read (a value that is not a string mentions nobody).
#[derive(Debug, Clone)]
pub struct Mentions<S>(pub Vec<String>, std::marker::PhantomData<S>);

impl<S> Default for Mentions<S> {
    fn default() -> Self {
        Mentions(Vec::new(), std::marker::PhantomData)
    }
}

impl<'de, S: Syntax> Deserialize<'de> for Mentions<S> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<S>(std::marker::PhantomData<S>);
        impl<'de, S: Syntax> Visitor<'de> for V<S> {
            type Value = Mentions<S>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a message's text")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Mentions<S>, E> {
                let mut out = Vec::new();
                S::scan(text, &mut out);
                Ok(Mentions(out, std::marker::PhantomData))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Mentions<S>, E> {
                Ok(Mentions::default())
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Mentions<S>, E> {
                Ok(Mentions::default())
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Mentions<S>, E> {
                Ok(Mentions::default())
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Mentions<S>, E> {
                Ok(Mentions::default())
            }
            fn visit_unit<E: de::Error>(self) -> Result<Mentions<S>, E> {
                Ok(Mentions::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Mentions<S>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Mentions::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Mentions<S>, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Mentions::default())
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// Matrix `m.mentions`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct MatrixMentions {
    pub user_ids: Vec<String>,
}

/// One of Discord's `mentions` (a user).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Mentioned {
    pub id: Option<String>,
}

/// A Slack `ts` (a string of seconds, or a number).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Stamp {
    Text(String),
    Number(f64),
}

impl Stamp {
    /// The id it gives a message, and its time in µs since 1970 (read
    /// from its digits, exactly).
    pub fn parse(&self) -> Option<(String, i64)> {
        match self {
            Stamp::Text(s) => {
                let t = s.trim();
                let (secs, frac) = t.split_once('.').unwrap_or((t, ""));
                if secs.is_empty()
                    || secs.len() > 12
                    || !secs.bytes().all(|b| b.is_ascii_digit())
                    || frac.len() > 9
                    || !frac.bytes().all(|b| b.is_ascii_digit())
                {
                    return None;
                }
                let secs: i64 = secs.parse().ok()?;
                let micros: i64 = format!("{frac:0<6}")[..6].parse().ok()?;
                Some((s.clone(), secs * 1_000_000 + micros))
            }
            Stamp::Number(x) => (x.is_finite() && x.abs() < 1e12)
                .then(|| (format!("{x}"), (x * 1e6).round() as i64)),
        }
    }
}

/// DiscordChatExporter's `author`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Author {
    pub id: Option<String>,
    pub name: Option<String>,
    #[serde(rename = "isBot")]
    pub is_bot: Option<bool>,
}

/// DiscordChatExporter's `reference`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Reference {
    #[serde(rename = "messageId")]
    pub message_id: Option<String>,
}

/// Matrix `m.in_reply_to`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct InReplyTo {
    pub event_id: Option<String>,
}

/// Matrix `m.relates_to`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Relates {
    pub rel_type: Option<String>,
    pub event_id: Option<String>,
    #[serde(rename = "m.in_reply_to")]
    pub in_reply_to: Option<InReplyTo>,
    pub is_falling_back: Option<bool>,
}

/// A Matrix event's `content` (the parts read).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct MatrixContent {
    pub msgtype: Option<String>,
    #[serde(rename = "m.relates_to")]
    pub relates: Option<Relates>,
    pub redacts: Option<String>,
    #[serde(rename = "m.mentions")]
    pub mentions: Option<MatrixMentions>,
    /// Pills in the HTML body (the text dropped once read).
    pub formatted_body: Option<Mentions<PillSyntax>>,
}

/// `content`: Matrix's object, Discord's text (its mentions read, the
/// text dropped), or anything else, skipped.
#[derive(Debug, Clone, Default)]
pub enum Content {
    #[default]
    Other,
    /// The ids a Discord text mentions (`<@123>`, `<@!123>`).
    Text(Vec<String>),
    Matrix(MatrixContent),
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Content;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a message's content")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Content, E> {
                let mut out = Vec::new();
                DiscordSyntax::scan(text, &mut out);
                Ok(Content::Text(out))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Content, E> {
                Ok(Content::Other)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Content, E> {
                Ok(Content::Other)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Content, E> {
                Ok(Content::Other)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Content, E> {
                Ok(Content::Other)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Content, E> {
                Ok(Content::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Content::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Content, A::Error> {
                MatrixContent::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(Content::Matrix)
            }
        }
        d.deserialize_any(V)
    }
}

/// Matrix `unsigned`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Unsigned {
    pub redacted_because: Option<IgnoredAny>,
}

/// One message or event of any of the three formats: the fields each
/// format names, all optional (a missing one is refused where needed).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawMsg {
    // Slack.
    pub ts: Option<Stamp>,
    pub user: Option<String>,
    pub bot_id: Option<String>,
    pub username: Option<String>,
    pub thread_ts: Option<Stamp>,
    pub subtype: Option<String>,
    pub edited: Option<IgnoredAny>,
    pub user_profile: Option<Profile>,
    pub bot_profile: Option<Profile>,
    /// The mentions in the text (the text dropped once read).
    pub text: Option<Mentions<SlackSyntax>>,
    // DiscordChatExporter (`type` is Matrix's too, and Slack's).
    pub id: Option<String>,
    pub timestamp: Option<String>,
    #[serde(rename = "timestampEdited")]
    pub timestamp_edited: Option<String>,
    pub author: Option<Author>,
    pub reference: Option<Reference>,
    pub mentions: Option<Vec<Mentioned>>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    // Matrix.
    pub event_id: Option<String>,
    pub sender: Option<String>,
    pub origin_server_ts: Option<f64>,
    pub content: Content,
    pub unsigned: Option<Unsigned>,
    pub redacts: Option<String>,
}

/// A Slack `users.json` entry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct User {
    pub id: Option<String>,
    pub name: Option<String>,
    pub real_name: Option<String>,
    pub profile: Option<Profile>,
    pub is_bot: Option<bool>,
}

/// Slack's names for a user or bot (a message's `user_profile` or
/// `bot_profile`, a `users.json` entry's `profile`): what `--humans` and
/// `--bots` may name it by.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Profile {
    pub name: Option<String>,
    pub display_name: Option<String>,
    pub real_name: Option<String>,
}

impl Profile {
    /// Its non-empty names.
    pub fn names(self) -> impl Iterator<Item = String> {
        [self.name, self.display_name, self.real_name]
            .into_iter()
            .flatten()
            .filter(|n| !n.is_empty())
    }
}

/// A bad file: `file:line:col: what`.
pub fn located(path: &Path, e: &serde_json::Error) -> String {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let what = clip(text.strip_suffix(&suffix).unwrap_or(&text), 200);
    if e.line() == 0 {
        format!("{}: {what}", path.display())
    } else {
        format!("{}:{}:{}: {what}", path.display(), e.line(), e.column())
    }
}

/// The messages of a sequence, each handed to `f`; an error `f` returns
/// is raised where the message ends (so it is located).
struct Each<'f, T, F>(&'f mut F, Rc<Meter>, std::marker::PhantomData<T>);

impl<'de, T: Deserialize<'de>, F: FnMut(T) -> Result<(), String>> Visitor<'de> for Each<'_, T, F> {
    type Value = u64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of messages")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<u64, A::Error> {
        let mut n = 0;
        loop {
            self.1.mark();
            let Some(m) = seq.next_element::<T>()? else {
                break;
            };
            (self.0)(m).map_err(de::Error::custom)?;
            n += 1;
        }
        Ok(n)
    }
}

impl<'de, T: Deserialize<'de>, F: FnMut(T) -> Result<(), String>> DeserializeSeed<'de>
    for Each<'_, T, F>
{
    type Value = u64;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<u64, D::Error> {
        d.deserialize_seq(self)
    }
}

/// The top level: an array of messages, or an object holding one.
struct Top<'f, T, F>(&'f mut F, Rc<Meter>, std::marker::PhantomData<T>);

impl<'de, T: Deserialize<'de>, F: FnMut(T) -> Result<(), String>> Visitor<'de> for Top<'_, T, F> {
    type Value = u64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of messages, or an object with one under \"messages\"")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<u64, A::Error> {
        Each(self.0, self.1, self.2).visit_seq(seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<u64, A::Error> {
        let mut n = 0;
        let mut found = false;
        loop {
            self.1.mark();
            let Some(k) = map.next_key::<String>()? else {
                break;
            };
            if MESSAGE_KEYS.contains(&k.as_str()) && !found {
                found = true;
                n = map.next_value_seed(Each::<T, F>(
                    self.0,
                    self.1.clone(),
                    std::marker::PhantomData,
                ))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        if !found {
            return Err(de::Error::custom(
                "no \"messages\" (nor \"chunk\", \"events\") array: not an export",
            ));
        }
        Ok(n)
    }
}

/// Bytes read so far, against the bounds: at most `limit` in all, and
/// [`MAX_MESSAGE_BYTES`] from the last mark (a message's start) on.
struct Meter {
    pos: Cell<u64>,
    mark: Cell<u64>,
    limit: u64,
    /// The bound said in the refusal (a zip's entry gets what its earlier
    /// entries left of it).
    total: u64,
    /// Decompressed (a gzipped file, a zip's entry): said in the refusal.
    packed: bool,
}

impl Meter {
    fn mark(&self) {
        self.mark.set(self.pos.get());
    }
}

/// A reader counted by a [`Meter`]; it fails once a bound is passed, so
/// neither a bomb nor one huge message is ever read (nor held) whole.
struct Metered<R> {
    inner: R,
    meter: Rc<Meter>,
}

impl<R: Read> Read for Metered<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let m = &self.meter;
        let pos = m.pos.get() + n as u64;
        m.pos.set(pos);
        if pos > m.limit {
            return Err(std::io::Error::other(format!(
                "more than {} bytes{}, more than an export may hold in all: export a shorter \
                 period",
                m.total,
                if m.packed { " once decompressed" } else { "" }
            )));
        }
        // The parser reads ahead by up to one buffer: a message is
        // measured to within 64 KiB.
        if pos - m.mark.get() > MAX_MESSAGE_BYTES + (1 << 16) {
            return Err(std::io::Error::other(format!(
                "a message (or value) of more than {} MiB: no chat platform's message is that \
                 long (is it an export?)",
                MAX_MESSAGE_BYTES >> 20
            )));
        }
        Ok(n)
    }
}

/// Read the file at `path` (at most `limit` bytes, decompressed: a
/// gzipped file is read as what it holds, told by its first bytes),
/// handing each message to `f`; returns the bytes read (decompressed). A file that
/// is not JSON, not an export's shape, or that `f` refuses is refused
/// naming `file:line:col`.
pub fn each<T, F>(path: &Path, limit: u64, f: F) -> Result<u64, String>
where
    T: for<'de> Deserialize<'de>,
    F: FnMut(T) -> Result<(), String>,
{
    let file = crate::files::open_input(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len > limit {
        return Err(format!(
            "{}: {len} bytes, more than the {limit} an export may hold in all: export a \
             shorter period",
            path.display()
        ));
    }
    let buf = std::io::BufReader::with_capacity(1 << 16, file);
    let (reader, gz) =
        crate::calibrate::read::ungzipped(buf).map_err(|e| format!("{}: {e}", path.display()))?;
    each_in(path, reader, (limit, limit), gz, f)
}

/// [`each`] on `reader` (`path` names it in errors; `limit`: the bytes
/// left to read, and the bound in all they are part of; `packed`: what is
/// read is decompressed). A UTF-8 byte order mark before the JSON is
/// skipped.
pub fn each_in<T, F, R>(
    path: &Path,
    reader: R,
    limit: (u64, u64),
    packed: bool,
    mut f: F,
) -> Result<u64, String>
where
    T: for<'de> Deserialize<'de>,
    F: FnMut(T) -> Result<(), String>,
    R: Read,
{
    let meter = Rc::new(Meter {
        pos: Cell::new(0),
        mark: Cell::new(0),
        limit: limit.0,
        total: limit.1,
        packed,
    });
    let metered = Metered {
        inner: reader,
        meter: meter.clone(),
    };
    let mut reader = std::io::BufReader::with_capacity(1 << 16, metered);
    let bom = reader
        .fill_buf()
        .map(|b| b.starts_with(&[0xef, 0xbb, 0xbf]))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if bom {
        reader.consume(3);
    }
    let mut de = serde_json::Deserializer::from_reader(reader);
    de::Deserializer::deserialize_any(
        &mut de,
        Top::<T, F>(&mut f, meter.clone(), std::marker::PhantomData),
    )
    .map_err(|e| located(path, &e))?;
    meter.mark();
    de.end().map_err(|e| located(path, &e))?;
    Ok(meter.pos.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Vec<RawMsg>, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let p = dir.path().join("x.json");
        std::fs::write(&p, text).map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        each(&p, 1 << 20, |m: RawMsg| {
            out.push(m);
            Ok(())
        })?;
        Ok(out)
    }

    #[test]
    fn arrays_and_objects_stream_their_messages() {
        let v = read(r#"[{"ts": "1.5", "user": "U1", "text": "hi"}]"#).unwrap_or_default();
        assert_eq!(v.len(), 1);
        let v = read(
            r#"{"guild": {"id": "1"}, "messages": [{"id": "7", "content": "q?",
               "author": {"id": "2", "isBot": true}}, {"id": "8", "content": {"body": "x",
               "msgtype": "m.notice"}}]}"#,
        )
        .unwrap_or_default();
        assert_eq!(v.len(), 2);
        assert!(
            matches!(&v[1].content, Content::Matrix(c) if c.msgtype.as_deref() == Some("m.notice"))
        );
        assert_eq!(
            v[0].author.as_ref().and_then(|a| a.is_bot),
            Some(true),
            "{v:?}"
        );
    }

    #[test]
    fn a_malformed_file_is_refused_at_its_line_and_column() {
        let e = read("[\n{\"ts\": \"1\"},\n{\"ts\": }\n]")
            .err()
            .unwrap_or_default();
        assert!(e.ends_with("x.json:3:8: expected value"), "{e}");
        let e = read("{\"guild\": 1}").err().unwrap_or_default();
        assert!(e.contains("x.json:1:12: no \"messages\""), "{e}");
        let e = read("[{\"ts\": {}}]").err().unwrap_or_default();
        assert!(e.contains("x.json:1:"), "{e}");
    }

    #[test]
    fn mentions_are_read_in_each_syntax() {
        let scan = |f: fn(&str, &mut Vec<String>), t: &str| {
            let mut v = Vec::new();
            f(t, &mut v);
            v
        };
        assert_eq!(
            scan(
                SlackSyntax::scan,
                "<@U0BBY38DM38> hi <@W1|bob> <!here> <@U0BBY38DM38>"
            ),
            ["U0BBY38DM38", "W1"]
        );
        assert_eq!(
            scan(DiscordSyntax::scan, "<@123> <@!456> <@&789> <#1> <@x>"),
            ["123", "456"]
        );
        assert_eq!(
            scan(
                PillSyntax::scan,
                "<a href=\"https://matrix.to/#/@bot:example.org\">bot</a> \
                 <a href='https://matrix.to/#/%40b2%3Aexample.org?via=x'>b2</a> \
                 <a href=\"https://matrix.to/#/#room:example.org\">room</a>"
            ),
            ["@bot:example.org", "@b2:example.org"]
        );
        let many: String = (0..1000).map(|i| format!("<@{i}>")).collect();
        assert_eq!(scan(DiscordSyntax::scan, &many).len(), MAX_MENTIONS);
    }

    #[test]
    fn values_in_errors_are_cut() {
        assert_eq!(clip("abc", 5), "abc");
        assert_eq!(clip("abcdef", 3), "abc…");
        assert_eq!(clip("ééééé", 2), "éé…");
    }

    #[test]
    fn a_gzipped_file_and_a_byte_order_mark_are_read_within_the_bound() {
        use std::io::Write;
        let dir = tempfile::tempdir().expect("tmp");
        let text = format!("\u{feff}[{}{{\"ts\": \"1.5\"}}]", " ".repeat(10_000));
        let p = dir.path().join("x.json.gz");
        let mut e = flate2::write::GzEncoder::new(
            std::fs::File::create(&p).expect("create"),
            flate2::Compression::default(),
        );
        e.write_all(text.as_bytes()).expect("gzip");
        e.finish().expect("gzip");
        let mut n = 0;
        let read = each(&p, 1 << 20, |_: RawMsg| {
            n += 1;
            Ok(())
        });
        assert_eq!(read.ok(), Some(text.len() as u64));
        assert_eq!(n, 1);
        // A bomb: more bytes decompressed than the bound, refused naming
        // the file (the file itself is small).
        let e = each(&p, 5_000, |_: RawMsg| Ok(()))
            .err()
            .unwrap_or_default();
        assert!(
            e.contains("x.json.gz: more than 5000 bytes once decompressed"),
            "{e}"
        );
    }
}
