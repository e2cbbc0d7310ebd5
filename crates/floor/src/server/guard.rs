//! The claim guard ([`ClaimGuard`]): the relays remembered and the
//! claims and MSG ids it refuses.

use super::*;

impl<N: Naming> Server<N> {
    /// What the claim guard ([`Config::claim_guard`]) would answer, at
    /// server time `now`, to a claim by `from` (in `role`) on
    /// `(channel, msg_id)` dated `started_at`: `None` when it lets the
    /// claim through (to the policy's own checks), else the typed refusal
    /// ([`Server::render`] words it as this server's ERROR). Changes
    /// nothing: a server that wants to refuse such a claim before it
    /// reaches the floor (and its log) asks this first;
    /// [`Server::handle`] applies the same check.
    pub fn claim_guard_refusal<D, M>(
        &self,
        now: Millis,
        role: Role,
        channel: &D,
        msg_id: &M,
        started_at: Stamp,
    ) -> Option<Refusal>
    where
        D: ToOwned<Owned = N::Dest> + ?Sized,
        M: ToOwned<Owned = N::Msg> + ?Sized,
    {
        let key = (channel.to_owned(), msg_id.to_owned());
        self.guard_refusal(now.0, role, &key, started_at)
    }

    /// What the claim guard ([`Config::claim_guard`]) would answer to a
    /// channel MSG from `from` to `channel`
    /// with the client's `id`: `None` when the guard lets it through (to
    /// the policy's own checks), else the typed refusal
    /// ([`Refusal::ServerFormId`]: an id of the server's form, `s1`, `s2`,
    /// ...; [`Server::render`] words it: `id_taken`, or `INVALID_MSG` under
    /// `agentchat-0.36`). An id remembered as another
    /// sender's message is not refused: [`Server::handle`] relays that MSG
    /// under the server's next id (and echoes it to its sender), so no
    /// client can block another's message by posting under its id first.
    /// Changes nothing; [`Server::handle`] applies the same check.
    pub fn msg_guard_refusal<A, D, M>(&self, from: &A, channel: &D, id: &M) -> Option<Refusal>
    where
        A: ToOwned<Owned = N::Agent> + ?Sized,
        D: ToOwned<Owned = N::Dest> + ?Sized,
        M: ToOwned<Owned = N::Msg> + ?Sized,
    {
        let channel = channel.to_owned();
        if !is_channel(&self.names, &channel) {
            return None;
        }
        self.id_refusal(&from.to_owned(), &channel, &id.to_owned())
    }

    /// [`Server::claim_guard_refusal`] for the claim on `key`.
    pub(super) fn guard_refusal(
        &self,
        now_ms: u64,
        role: Role,
        key: &Key<N>,
        started_at: Stamp,
    ) -> Option<Refusal> {
        if self.cfg.claim_guard == ClaimGuard::Off || role == Role::Operator {
            return None;
        }
        let now = now_ms.max(self.now);
        let relayed_at = self.relays.get(now, key).map(|(_, at)| at);
        let (channel, msg_id) = key;
        let Some(at) = relayed_at else {
            return Some(Refusal::NotRelayed {
                msg_id: clip(&self.names.show_msg(msg_id)),
                channel: clip(&self.names.show_dest(channel)),
            });
        };
        if let ClaimGuard::Clock { skew_ms, epoch_ms } = self.cfg.claim_guard {
            // The relay on the clients' wall clock, less the tolerance.
            let floor = i128::from(epoch_ms) + i128::from(at) - i128::from(skew_ms);
            let early = match started_at {
                Stamp::Int(i) => i128::from(i) < floor,
                Stamp::Float(f) => f < floor as f64,
            };
            if early {
                return Some(Refusal::EarlyClaim {
                    started_at,
                    skew_ms,
                    msg_id: clip(&self.names.show_msg(msg_id)),
                    relayed_at: i128::from(epoch_ms) + i128::from(at),
                });
            }
        }
        None
    }

    /// Claim guard: remember that `from` relayed `(channel, msg_id)` at
    /// `now` (the memory forgets what its bounds say). A message new under
    /// that id (not remembered as `from`'s) drops any claim or marker left
    /// on the id by an older message.
    pub(super) fn remember_relay(
        &mut self,
        now: u64,
        from: &N::Agent,
        channel: &N::Dest,
        msg_id: &N::Msg,
    ) {
        let key = (channel.clone(), msg_id.clone());
        let same = self.relays.get(now, &key).is_some_and(|(a, _)| a == from);
        if !same && self.claims.contains_key(&key) {
            self.remove_claim(&key);
        }
        self.relays.remember(now, from, key);
    }

    /// Claim guard: why a channel MSG from `from` with the client's `id`
    /// is refused, if it is: an id of the server's form.
    pub(super) fn id_refusal(
        &self,
        _from: &N::Agent,
        _channel: &N::Dest,
        id: &N::Msg,
    ) -> Option<Refusal> {
        if self.cfg.claim_guard == ClaimGuard::Off || self.names.msg_is_empty(id) {
            return None;
        }
        let shown = self.names.show_msg(id);
        is_server_form(&shown).then(|| Refusal::ServerFormId { id: clip(&shown) })
    }

    /// Claim guard: whether the client's `id` for a channel MSG from
    /// `from` is remembered as the message of another sender still on the
    /// connection it posted it from, in `channel` (the MSG is then relayed
    /// under a server id: an id stands for one sender's message).
    pub(super) fn id_taken(
        &self,
        now: u64,
        from: &N::Agent,
        channel: &N::Dest,
        id: &N::Msg,
    ) -> bool {
        if self.cfg.claim_guard == ClaimGuard::Off || self.names.msg_is_empty(id) {
            return false;
        }
        let key = (channel.clone(), id.clone());
        self.relays
            .owner(now.max(self.now), &key)
            .is_some_and(|sender| sender != from)
    }
}

/// Whether `id` has the form of the ids the server gives MSGs sent
/// without one: `s` and decimal digits.
fn is_server_form(id: &str) -> bool {
    id.strip_prefix('s')
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}
