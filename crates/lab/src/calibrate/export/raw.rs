//! One JSON file of an export read as a stream of messages: a top-level
//! array of messages (a Slack day file, a list of Matrix events), or an
//! object whose `messages`, `chunk` or `events` key holds them
//! (DiscordChatExporter, Element's and the client-server API's room
//! exports). Each message is deserialized on its own into [`RawMsg`],
//! which names only the fields calibrate reads: texts and everything
//! else are skipped by the parser, never kept.

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;
use std::io::Read;
use std::path::Path;

/// The keys of a top-level object that hold the messages.
pub const MESSAGE_KEYS: [&str; 3] = ["messages", "chunk", "events"];

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
}

/// `content`: Matrix's object, or anything else (Discord's text), skipped.
#[derive(Debug, Clone, Default)]
pub enum Content {
    #[default]
    Other,
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
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Content, E> {
                Ok(Content::Other)
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
    // DiscordChatExporter (`type` is Matrix's too, and Slack's).
    pub id: Option<String>,
    pub timestamp: Option<String>,
    #[serde(rename = "timestampEdited")]
    pub timestamp_edited: Option<String>,
    pub author: Option<Author>,
    pub reference: Option<Reference>,
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
    let what = text.strip_suffix(&suffix).unwrap_or(&text);
    if e.line() == 0 {
        format!("{}: {what}", path.display())
    } else {
        format!("{}:{}:{}: {what}", path.display(), e.line(), e.column())
    }
}

/// The messages of a sequence, each handed to `f`; an error `f` returns
/// is raised where the message ends (so it is located).
struct Each<'f, T, F>(&'f mut F, std::marker::PhantomData<T>);

impl<'de, T: Deserialize<'de>, F: FnMut(T) -> Result<(), String>> Visitor<'de> for Each<'_, T, F> {
    type Value = u64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of messages")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<u64, A::Error> {
        let mut n = 0;
        while let Some(m) = seq.next_element::<T>()? {
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
struct Top<'f, T, F>(&'f mut F, std::marker::PhantomData<T>);

impl<'de, T: Deserialize<'de>, F: FnMut(T) -> Result<(), String>> Visitor<'de> for Top<'_, T, F> {
    type Value = u64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of messages, or an object with one under \"messages\"")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<u64, A::Error> {
        Each(self.0, self.1).visit_seq(seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<u64, A::Error> {
        let mut n = 0;
        let mut found = false;
        while let Some(k) = map.next_key::<String>()? {
            if MESSAGE_KEYS.contains(&k.as_str()) && !found {
                found = true;
                n = map.next_value_seed(Each::<T, F>(self.0, std::marker::PhantomData))?;
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

/// Read the file at `path` (at most `limit` bytes), handing each message
/// to `f`; returns how many were read. A file that is not JSON, not an
/// export's shape, or that `f` refuses is refused naming `file:line:col`.
pub fn each<T, F>(path: &Path, limit: u64, mut f: F) -> Result<u64, String>
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
    let reader = std::io::BufReader::with_capacity(1 << 16, file.take(limit));
    let mut de = serde_json::Deserializer::from_reader(reader);
    let n =
        de::Deserializer::deserialize_any(&mut de, Top::<T, F>(&mut f, std::marker::PhantomData))
            .map_err(|e| located(path, &e))?;
    de.end().map_err(|e| located(path, &e))?;
    Ok(n)
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
}
