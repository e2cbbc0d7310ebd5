//! The server's one way out: [`Sends`], each payload once.

use super::*;

/// One send in owned form: what the tests compare.
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outgoing<N: Naming = Text> {
    /// The recipient.
    pub to: N::Agent,
    /// The message.
    pub msg: ServerMsg<N>,
}

#[cfg(test)]
impl<N: Naming> Server<N> {
    /// Tests: [`Server::handle`], appending the sends to `out` owned.
    pub(crate) fn run_owned(&mut self, now_ms: u64, input: Input<N>, out: &mut Vec<Outgoing<N>>) {
        let mut sends = Sends::new();
        self.handle(Millis(now_ms), input, &mut sends);
        out.extend(sends.iter().map(|(to, msg)| Outgoing {
            to: to.clone(),
            msg: msg.clone(),
        }));
    }
}

#[cfg(test)]
impl Server<Text> {
    /// Tests: a raw frame through the edge ([`crate::edge::decode_bytes`]).
    pub(crate) fn run_frame(
        &mut self,
        now_ms: u64,
        from: &str,
        role: Role,
        bytes: &[u8],
        out: &mut Vec<Outgoing>,
    ) {
        self.run_owned(now_ms, crate::edge::decode_bytes(from, role, bytes), out);
    }

    /// Tests: a JSON frame through the edge ([`crate::edge::decode`]).
    pub(crate) fn run_value(
        &mut self,
        now_ms: u64,
        from: &str,
        role: Role,
        value: &serde_json::Value,
        out: &mut Vec<Outgoing>,
    ) {
        self.run_owned(now_ms, crate::edge::decode(from, role, value), out);
    }
}

/// What [`Server::handle`] sends, the server's one way out: each payload
/// once, and each send as its recipient and the index of its payload. A
/// relay to N members is one payload and N pairs, with no copy and no
/// reference count per recipient: a server encodes each payload once and
/// writes the bytes to N sockets; the simulator routes sends by number.
/// [`Sends::iter`] walks the sends in order as (recipient, message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sends<N: Naming = Text> {
    payloads: Vec<Arc<ServerMsg<N>>>,
    sends: Vec<(N::Agent, u32)>,
}

impl<N: Naming> Default for Sends<N> {
    fn default() -> Self {
        Sends {
            payloads: Vec::new(),
            sends: Vec::new(),
        }
    }
}

impl<N: Naming> Sends<N> {
    /// No sends (each call of the server appends to what is there).
    pub fn new() -> Self {
        Self::default()
    }

    /// Forget every send, keeping the room.
    pub fn clear(&mut self) {
        self.payloads.clear();
        self.sends.clear();
    }

    /// The number of sends.
    pub fn len(&self) -> usize {
        self.sends.len()
    }

    /// Whether there are no sends.
    pub fn is_empty(&self) -> bool {
        self.sends.is_empty()
    }

    /// The payloads, in the order first sent.
    pub fn payloads(&self) -> &[Arc<ServerMsg<N>>] {
        &self.payloads
    }

    /// The sends, in order: each recipient with the index of its payload
    /// in [`payloads`](Self::payloads).
    pub fn sends(&self) -> &[(N::Agent, u32)] {
        &self.sends
    }

    /// The sends in order, each as its recipient and its message.
    pub fn iter(&self) -> impl Iterator<Item = (&N::Agent, &ServerMsg<N>)> {
        self.sends
            .iter()
            .filter_map(|(to, i)| Some((to, &**self.payloads.get(*i as usize)?)))
    }

    /// Add payload `msg`; its index. (A caller that never clears would
    /// need 2^32 payloads, hundreds of GB, before it wrapped.)
    pub(super) fn add_payload(&mut self, msg: ServerMsg<N>) -> u32 {
        let i = self.payloads.len() as u32;
        self.payloads.push(Arc::new(msg));
        i
    }

    /// Send `msg` to `to`.
    pub(super) fn push(&mut self, to: N::Agent, msg: ServerMsg<N>) {
        let i = self.add_payload(msg);
        self.sends.push((to, i));
    }

    /// Send `msg` to every member of `parts`, in order.
    pub(super) fn fan_out(&mut self, parts: [&[N::Agent]; 2], msg: ServerMsg<N>) {
        let i = self.add_payload(msg);
        self.sends.reserve(parts[0].len() + parts[1].len());
        for part in parts {
            self.sends.extend(part.iter().map(|m| (m.clone(), i)));
        }
    }
}
