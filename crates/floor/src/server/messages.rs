//! A MSG: where it goes, what it releases, the id it goes by.

use super::*;

/// A MSG as received: who sent it and its fields.
pub(super) struct MsgReq<N: Naming> {
    pub(super) from: N::Agent,
    pub(super) role: Role,
    pub(super) id: Option<N::Msg>,
    pub(super) to: N::Dest,
    pub(super) content: N::Content,
    pub(super) in_reply_to: Option<N::Msg>,
}

impl<N: Naming> Server<N> {
    /// MSG: validate the target and the sender, relay the message (to the
    /// channel or the DM peer), then release the sender's claims.
    pub(super) fn on_msg(&mut self, now: u64, msg: MsgReq<N>, out: &mut Sends<N>) {
        let Some(dest) = self.msg_dest(&msg.from, &msg.to, out) else {
            return;
        };
        if !self.msg_admitted(now, &msg, &dest, out) {
            return;
        }
        if matches!(dest, Place::Channel)
            && let Some(id) = &msg.id
            && let Some(refusal) = self.id_refusal(&msg.from, &msg.to, id)
        {
            return self.refuse(&msg.from, refusal, out);
        }
        // Another sender's id: this message is relayed under the server's
        // next id instead, and echoed to its sender so it learns it.
        let renamed = matches!(dest, Place::Channel)
            && msg
                .id
                .as_ref()
                .is_some_and(|id| self.id_taken(now, &msg.from, &msg.to, id));
        let MsgReq {
            from,
            mut id,
            to,
            content,
            in_reply_to,
            ..
        } = msg;
        if renamed {
            id = None;
            self.stats.ids_renamed += 1;
        }
        let dm = matches!(dest, Place::Dm(_));
        // The release sends nothing and the relay reads only the
        // membership, so releasing first lets the relay take the fields.
        if !dm && self.tracking() {
            self.release_on_msg(&from, &to, in_reply_to.as_ref());
        }
        let id = self.msg_id_or_assign(id);
        if !dm && self.cfg.claim_guard != ClaimGuard::Off {
            self.remember_relay(now, &from, &to, &id);
        }
        let relayed = ServerMsg::Msg {
            id,
            from,
            to,
            content,
            in_reply_to,
        };
        if let Place::Dm(peer) = dest {
            self.stats.relayed += 1;
            out.push(peer, relayed);
            return;
        }
        if renamed {
            self.stats.relayed += 1;
            let echo = relayed.clone();
            let ServerMsg::Msg { from, .. } = &echo else {
                unreachable!("built as a Msg above")
            };
            out.push(from.clone(), echo);
        }
        self.fan_out(relayed, out);
    }

    /// Decode a MSG's `to`: a channel or a DM peer; `None` (the MSG refused
    /// with an ERROR) when it is neither.
    pub(super) fn msg_dest(
        &mut self,
        from: &N::Agent,
        to: &N::Dest,
        out: &mut Sends<N>,
    ) -> Option<Place<N::Agent>> {
        let place = self.names.place(to);
        if place == Place::Invalid {
            let error = DecodeError::BadChannel {
                field: "to",
                value: clip(&self.names.show_dest(to)),
                dm_allowed: true,
            };
            let claim = false;
            self.refuse(from, Refusal::Undecodable { error, claim }, out);
            return None;
        }
        Some(place)
    }

    /// Check that the sender may send this MSG under the policy's gate;
    /// `false` when it is refused (an ERROR sent).
    pub(super) fn msg_admitted(
        &mut self,
        now: u64,
        msg: &MsgReq<N>,
        dest: &Place<N::Agent>,
        out: &mut Sends<N>,
    ) -> bool {
        let (from, to) = (&msg.from, &msg.to);
        if self.rules.msg_gate == MsgGate::Agentchat {
            // `handleMsg` (`lib/server/handlers/message.ts`), in its order.
            let ok = match msg.role {
                Role::Agent => self.agentchat_sender_ok(now, from, out),
                Role::Operator if self.cfg.rate_limit_operator => {
                    self.agentchat_rate_ok(now, from, out)
                }
                Role::Operator => true,
            };
            if !ok {
                return false;
            }
            return self.agentchat_msg_target_ok(from, to, dest, out);
        }
        if matches!(dest, Place::Channel) && !self.is_member(from, to) {
            let channel = self.names.show_dest(to).to_string();
            self.refuse(from, Refusal::NotMember { channel }, out);
            return false;
        }
        true
    }

    /// The MSG's own id, or a fresh server id (`s1`, `s2`, ...) when it has
    /// none.
    pub(super) fn msg_id_or_assign(&mut self, id: Option<N::Msg>) -> N::Msg {
        match id.filter(|i| !self.names.msg_is_empty(i)) {
            Some(id) => id,
            None => {
                self.next_msg_id += 1;
                self.names.server_msg_id(self.next_msg_id)
            }
        }
    }

    /// A channel MSG from `from` releases its claims in `to` as the policy
    /// says: all of them, or only the one it replies to (kept as an
    /// "answered" marker under `tombstone`).
    pub(super) fn release_on_msg(
        &mut self,
        from: &N::Agent,
        to: &N::Dest,
        in_reply_to: Option<&N::Msg>,
    ) {
        match (self.rules.release, in_reply_to) {
            (Release::AllInChannel, _) | (Release::Holder, None) => {
                self.release_all_in(from, to);
            }
            (Release::Holder, Some(m)) => {
                let key = (to.clone(), m.clone());
                let held = self
                    .claims
                    .get(&key)
                    .is_some_and(|c| !c.answered && c.holder == *from);
                if held && self.rules.tombstone {
                    self.mark_answered(&key);
                } else if held {
                    self.remove_claim(&key);
                }
            }
        }
    }
}
