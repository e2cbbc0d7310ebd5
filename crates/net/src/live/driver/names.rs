//! Ids on the wire versus the driver's, mapped at the boundary both ways.
//!
//! A keyed server names an agent by its key (the actors and the trace use
//! `agent-NNN`). A server that assigns message ids of its own (agentchat
//! does: it drops the sender's `id`) relays the driver's `mN` under another
//! id, learnt the first time the message comes back: by its content, which
//! is exactly what we sent (every post and reply is unique: `question N`,
//! `answer to mN from agent-NNN`), never by parsing it. With `herdsim
//! serve` (names kept, ids kept) nothing changes.

use super::Driver;
use serde_json::Value;
use std::collections::BTreeMap;

/// See the module docs.
#[derive(Debug, Default)]
pub(super) struct Names {
    /// Agent and operator names to wire ids, and back (keyed only).
    pub(super) to_wire: BTreeMap<String, String>,
    pub(super) from_wire: BTreeMap<String, String>,
    /// Message ids: the server's to the driver's, and back.
    alias_in: BTreeMap<String, String>,
    alias_out: BTreeMap<String, String>,
    /// Our MSGs not yet seen relayed: their content as sent (after the
    /// outward mapping) -> the driver's id. One entry per message we sent,
    /// removed when it comes back.
    sent: BTreeMap<String, String>,
}

impl Names {
    fn inward(&self, s: &str) -> Option<&String> {
        self.from_wire.get(s).or_else(|| self.alias_in.get(s))
    }

    fn outward(&self, s: &str) -> Option<&String> {
        self.to_wire.get(s).or_else(|| self.alias_out.get(s))
    }

    fn is_empty(&self) -> bool {
        self.to_wire.is_empty() && self.alias_in.is_empty()
    }

    /// The server's id of a message we sent, learnt (and the message
    /// forgotten as unseen) when its relay comes back: by `server_id` if
    /// that is ours already, else by its content.
    fn learn(&mut self, server_id: &str, content: &str, ours: &dyn Fn(&str) -> bool) {
        if ours(server_id) || self.alias_in.contains_key(server_id) {
            if self.sent.get(content).is_some_and(|id| id == server_id) {
                self.sent.remove(content);
            }
            return;
        }
        if let Some(id) = self.sent.remove(content) {
            self.alias_out.insert(id.clone(), server_id.to_string());
            self.alias_in.insert(server_id.to_string(), id);
        }
    }
}

/// Map every token of `text` (runs of `[A-Za-z0-9_-]`) through `f`.
pub(super) fn map_tokens(text: &str, f: &dyn Fn(&str) -> Option<String>) -> String {
    let is_tok = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut tok = String::new();
    for c in text.chars().map(Some).chain(std::iter::once(None)) {
        match c {
            Some(c) if is_tok(c) => tok.push(c),
            _ => {
                if !tok.is_empty() {
                    match f(&tok) {
                        Some(m) => out.push_str(&m),
                        None => out.push_str(&tok),
                    }
                    tok.clear();
                }
                if let Some(c) = c {
                    out.push(c);
                }
            }
        }
    }
    out
}

/// Map the strings of a frame: whole values (`"m3"`, `"@id"`) and the
/// tokens of `content`.
pub(super) fn map_value(v: &mut Value, f: &dyn Fn(&str) -> Option<String>) {
    match v {
        Value::Object(obj) => {
            for (k, x) in obj.iter_mut() {
                match x {
                    Value::String(s) if k == "content" => *s = map_tokens(s, f),
                    Value::String(s) => {
                        if let Some(m) = f(s) {
                            *s = m;
                        } else if let Some(rest) = s.strip_prefix('@')
                            && let Some(m) = f(rest)
                        {
                            *s = format!("@{m}");
                        }
                    }
                    other => map_value(other, f),
                }
            }
        }
        Value::Array(xs) => xs.iter_mut().for_each(|x| map_value(x, f)),
        _ => {}
    }
}

impl Driver<'_> {
    /// A client message as the server must see it (keyed names and learnt
    /// message ids mapped out). A MSG's content is remembered until its
    /// relay comes back.
    pub(super) fn wire(&mut self, msg: &crate::floor::ClientMsg) -> String {
        let mut v = msg.to_json();
        if !self.names.is_empty() {
            let names = &self.names;
            map_value(&mut v, &|s| names.outward(s).cloned());
        }
        if let crate::floor::ClientMsg::Msg { id: Some(id), .. } = msg
            && let Some(content) = v["content"].as_str()
        {
            self.names.sent.insert(content.to_string(), id.clone());
        }
        v.to_string()
    }

    /// A server MSG or floor frame (already in herdsim's wire form) in the
    /// driver's names: a MSG we sent learns its server id first; then
    /// keyed ids back to agent names and the server's message ids back to
    /// the driver's.
    pub(super) fn inward(&mut self, v: &mut Value) {
        if v["type"] == "MSG"
            && let (Some(id), Some(content)) = (v["id"].as_str(), v["content"].as_str())
        {
            let depth = &self.depth;
            self.names
                .learn(id, content, &|x: &str| depth.contains_key(x));
        }
        if !self.names.is_empty() {
            let names = &self.names;
            map_value(v, &|s| names.inward(s).cloned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_map_ids_both_ways() {
        let mut n = Names::default();
        n.from_wire
            .insert("a1b2c3d4e5f60718".into(), "agent-000".into());
        n.alias_in.insert("msg_77".into(), "m3".into());
        let mut v = serde_json::json!({"type": "MSG", "id": "msg_77", "from": "@a1b2c3d4e5f60718",
            "to": "#general", "content": "@a1b2c3d4e5f60718 answer to msg_77 from a1b2c3d4e5f60718"});
        map_value(&mut v, &|s| n.inward(s).cloned());
        assert_eq!(v["id"], "m3");
        assert_eq!(v["from"], "@agent-000");
        assert_eq!(v["to"], "#general");
        assert_eq!(v["content"], "@agent-000 answer to m3 from agent-000");
        assert_eq!(
            map_tokens("hi, @x-1!", &|s| (s == "x-1").then(|| "y".into())),
            "hi, @y!"
        );
    }

    #[test]
    fn a_server_id_is_learnt_from_the_content_we_sent() {
        let mut n = Names::default();
        n.sent.insert("question 4".into(), "m4".into());
        n.sent.insert("question 5".into(), "m5".into());
        let ours = |x: &str| x == "m5";
        // agentchat: its own id for our m4.
        n.learn("1795-abc", "question 4", &ours);
        assert_eq!(n.inward("1795-abc"), Some(&"m4".to_string()));
        assert_eq!(n.outward("m4"), Some(&"1795-abc".to_string()));
        // Seen again: nothing new; someone else's content: nothing learnt.
        n.learn("1795-abc", "question 4", &ours);
        n.learn("1795-xyz", "question 9", &ours);
        assert_eq!(n.inward("1795-xyz"), None);
        // herdsim serve: our own id comes back; forgotten as unseen.
        n.learn("m5", "question 5", &ours);
        assert!(n.sent.is_empty());
        assert_eq!(n.inward("m5"), None);
    }
}
