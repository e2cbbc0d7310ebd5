//! The claim table: a RESPONDING_TO judged, granted, denied, displaced,
//! released and expired.

use super::*;

#[derive(Debug, Clone)]
pub(super) struct Claim<A> {
    pub(super) holder: A,
    pub(super) started_at: Stamp,
    /// Ordering value: `started_at`, or the receive time under `server-time`.
    pub(super) order: Stamp,
    pub(super) granted_at: u64,
    pub(super) deadline: u64,
    /// Key in the deadline index, with `deadline`.
    pub(super) seq: u64,
    pub(super) answered: bool,
}

/// A RESPONDING_TO as received: who sent it and its fields.
pub(super) struct ClaimReq<N: Naming> {
    pub(super) from: N::Agent,
    pub(super) role: Role,
    pub(super) msg_id: N::Msg,
    pub(super) started_at: Stamp,
    pub(super) channel: N::Dest,
}

impl<N: Naming> ClaimReq<N> {
    /// The claim as relayed to the channel.
    pub(super) fn relayed(self) -> ServerMsg<N> {
        ServerMsg::RespondingTo {
            msg_id: self.msg_id,
            from: self.from,
            started_at: self.started_at,
            channel: self.channel,
        }
    }
}

/// The policy's verdict on a claim, with what a denial's YIELD names: the
/// current claim's `started_at` and (for a denial only) its holder.
pub(super) struct Decision<A> {
    pub(super) verdict: Verdict<A>,
    pub(super) held_started_at: Stamp,
    pub(super) held_by: Option<A>,
}

impl<N: Naming> Server<N> {
    /// YIELD to `to` for `(channel, msg_id)` (counted; the caller sends it).
    pub(super) fn make_yield(
        &mut self,
        to: N::Agent,
        (channel, msg_id): (&N::Dest, &N::Msg),
        winner: &N::Agent,
        holder_started_at: Stamp,
        reason: &str,
    ) -> (N::Agent, ServerMsg<N>) {
        let detail = match self.rules.yield_form {
            YieldForm::Winner => None,
            YieldForm::HolderDetail => Some(YieldDetail {
                holder_started_at,
                reason: reason.to_string(),
            }),
        };
        self.stats.yields += 1;
        (
            to,
            ServerMsg::Yield {
                msg_id: msg_id.clone(),
                winner: winner.clone(),
                channel: channel.clone(),
                detail,
            },
        )
    }

    /// RESPONDING_TO: validate the claim, look up the current one, let the
    /// policy decide, then record the verdict and send what it says.
    pub(super) fn on_claim(&mut self, now: u64, mut claim: ClaimReq<N>, out: &mut Sends<N>) {
        self.stats.claims_received += 1;
        if !self.claim_well_formed(&claim, out) || !self.claim_admitted(&claim, out) {
            return;
        }
        if self.cfg.claim_guard != ClaimGuard::Off {
            let key = (claim.channel.clone(), claim.msg_id.clone());
            if let Some(refusal) = self.guard_refusal(now, claim.role, &key, claim.started_at) {
                self.stats.claims_refused += 1;
                return self.error(&claim.from, refusal, out);
            }
        }
        if self.rules.order == ClaimOrder::StartedAtDouble {
            // JavaScript holds the parsed double: it compares it, stores it
            // and echoes it (2^53 + 1 comes back as 2^53).
            claim.started_at = Stamp::from_f64(claim.started_at.as_f64());
        }
        if claim.role == Role::Operator && self.tracking() && self.rules.operator_takes_floor {
            return self.operator_claim(now, claim, out);
        }
        if !self.tracking() || claim.role == Role::Operator {
            return self.relay_untracked_claim(claim, out);
        }
        let order = self.claim_order(now, claim.started_at);
        let decision = self.judge_claim(&claim, order);
        self.apply_claim_verdict(now, claim, order, decision, out);
    }

    /// Check a claim's fields (`msg_id`, `channel`, `started_at`); `false`
    /// when it goes no further (an ERROR sent, or a DM claim dropped).
    pub(super) fn claim_well_formed(&mut self, claim: &ClaimReq<N>, out: &mut Sends<N>) -> bool {
        let from = &claim.from;
        if self.names.msg_is_empty(&claim.msg_id) {
            if self.rules.errors == ErrorStyle::Agentchat {
                self.error(from, Refusal::InvalidClaimField("msg_id"), out);
            } else {
                let error = DecodeError::Empty("msg_id");
                let claim = false; // worded as any undecodable frame
                self.error(from, Refusal::Undecodable { error, claim }, out);
            }
            return false;
        }
        if !self.claim_channel_ok(claim, out) {
            return false;
        }
        if let Err((code, reason)) = self.rules.started_at.check(claim.started_at) {
            self.error(from, Refusal::BadStartedAt { code, reason }, out);
            return false;
        }
        true
    }

    /// Check a claim's `channel` field as the policy's channel model says;
    /// `false` when it goes no further (an ERROR sent, or a DM claim, to
    /// which the protocol does not apply, dropped without a word).
    pub(super) fn claim_channel_ok(&mut self, claim: &ClaimReq<N>, out: &mut Sends<N>) -> bool {
        let (from, channel) = (&claim.from, &claim.channel);
        if self.rules.channels == Channels::Registry {
            // `validateClientMessage` (`lib/protocol.ts`): `isValidChannel`,
            // so a DM target or a long name is an error there.
            if !self.agentchat_channel_ok(channel) {
                self.error(from, Refusal::InvalidClaimField("channel"), out);
                return false;
            }
            return true;
        }
        match self.names.place(channel) {
            Place::Invalid => {
                let error = DecodeError::BadChannel {
                    field: "channel",
                    value: clip(&self.names.show_dest(channel)),
                    dm_allowed: true,
                };
                let claim = false; // worded as any undecodable frame
                self.error(from, Refusal::Undecodable { error, claim }, out);
                false
            }
            // The protocol does not apply to DMs: no claim, nothing sent.
            Place::Dm(_) => false,
            Place::Channel => true,
        }
    }

    /// Check that the sender may claim in the channel and that the channel
    /// exists; `false` when the claim goes no further (an ERROR sent, or
    /// the claim dropped silently as agentchat does).
    pub(super) fn claim_admitted(&mut self, claim: &ClaimReq<N>, out: &mut Sends<N>) -> bool {
        let (from, channel) = (&claim.from, &claim.channel);
        if self.rules.msg_gate == MsgGate::Agentchat
            && claim.role == Role::Agent
            && self.unidentified.contains(from)
        {
            // `if (!rtAgent || ...) break;` (`lib/server.ts`): dropped silently.
            return false;
        }
        if self.rules.membership_required && !self.is_member(from, channel) {
            let channel = self.names.show_dest(channel).to_string();
            self.error(from, Refusal::NotMember { channel }, out);
            return false;
        }
        // `if (!channel) break;` (`lib/server.ts`): dropped silently.
        self.channel_exists(channel)
    }

    /// A claim that is not arbitrated (tracking off, or the operator's):
    /// relayed when tracking is off or the policy relays every claim.
    pub(super) fn relay_untracked_claim(&mut self, claim: ClaimReq<N>, out: &mut Sends<N>) {
        if !self.tracking() || self.rules.announce == Announce::RelayEvery {
            self.fan_out(claim.relayed(), out);
        }
    }

    /// An operator's claim under [`Rules::operator_takes_floor`]: humans
    /// always get the floor, so it is granted whatever its `started_at`
    /// (ordered before every agent's claim), displacing a live holder (who
    /// gets a YIELD naming the operator) or an answered marker, and
    /// announced as any grant. Agents' later claims are denied until the
    /// operator answers, leaves or the claim expires.
    pub(super) fn operator_claim(&mut self, now: u64, claim: ClaimReq<N>, out: &mut Sends<N>) {
        let key = (claim.channel.clone(), claim.msg_id.clone());
        let held = self
            .claims
            .get(&key)
            .map(|c| (c.answered, c.holder == claim.from));
        let verdict = match held {
            None => Verdict::Grant,
            Some((true, _)) => {
                // An answered marker: gone, nobody to yield.
                self.remove_claim(&key);
                Verdict::Grant
            }
            // A repeat: the floor is the operator's already.
            Some((false, true)) => Verdict::Repeat,
            Some((false, false)) => Verdict::Displace,
        };
        let decision = Decision {
            verdict,
            held_started_at: Stamp::Int(0),
            held_by: None,
        };
        let first = Stamp::Float(f64::NEG_INFINITY);
        self.apply_claim_verdict(now, claim, first, decision, out);
    }

    /// The value a claim is ordered by under the policy: its `started_at`,
    /// or the server's receive time.
    pub(super) fn claim_order(&self, now: u64, started_at: Stamp) -> Stamp {
        match self.rules.order {
            ClaimOrder::StartedAt | ClaimOrder::StartedAtDouble => started_at,
            ClaimOrder::ServerTime => Stamp::Int(i64::try_from(now).unwrap_or(i64::MAX)),
        }
    }

    /// Look up the current claim on `(channel, msg_id)` and ask the policy
    /// for its verdict on this one.
    pub(super) fn judge_claim(&self, claim: &ClaimReq<N>, order: Stamp) -> Decision<N::Agent> {
        let key = (claim.channel.clone(), claim.msg_id.clone());
        let current = self.claims.get(&key);
        let slot = match current {
            None => Slot::Free,
            Some(c) if c.answered => Slot::Answered { by: &c.holder },
            Some(c) => Slot::Held {
                holder: &c.holder,
                order: c.order,
            },
        };
        let verdict = self.cfg.policy.judge(slot, &claim.from, order);
        // The holder's name is needed (after `self` changes) only for a
        // denial's YIELD.
        let deny = matches!(verdict, Verdict::Deny | Verdict::DenySelf);
        let (held_started_at, held_by) = current.map_or((Stamp::Int(0), None), |c| {
            (c.started_at, deny.then(|| c.holder.clone()))
        });
        Decision {
            verdict,
            held_started_at,
            held_by,
        }
    }

    /// Record the policy's verdict in the claim table and send the
    /// announcement and YIELDs it calls for.
    pub(super) fn apply_claim_verdict(
        &mut self,
        now: u64,
        claim: ClaimReq<N>,
        order: Stamp,
        decision: Decision<N::Agent>,
        out: &mut Sends<N>,
    ) {
        let ClaimReq {
            from,
            msg_id,
            started_at,
            channel,
            ..
        } = &claim;
        let (started_at, key) = (*started_at, (channel, msg_id));
        let held_started_at = decision.held_started_at;
        // A YIELD is built before the announcement (which takes the
        // claim's fields) and sent after it.
        match decision.verdict {
            Verdict::Repeat => {}
            Verdict::Grant => {
                self.insert_claim(channel, msg_id, from, started_at, order, now);
                self.announce_grant(claim, out);
            }
            Verdict::Displace | Verdict::RegrantSelf => {
                let owned = (channel.clone(), msg_id.clone());
                let displaced = self.remove_claim(&owned).map(|c| c.holder);
                self.insert_claim(channel, msg_id, from, started_at, order, now);
                if matches!(decision.verdict, Verdict::Displace) {
                    self.stats.overruled += 1;
                }
                let y = displaced
                    .map(|old| self.make_yield(old, key, from, started_at, REASON_DISPLACED));
                self.announce_grant(claim, out);
                if let Some((to, y)) = y {
                    out.push(to, y);
                }
            }
            Verdict::Deny | Verdict::DenySelf => {
                // A denial always comes with the current holder.
                let by = decision.held_by.as_ref().unwrap_or(from);
                let y = self.make_yield(from.clone(), key, by, held_started_at, REASON_DENIED);
                self.announce_denial(claim, out);
                out.push(y.0, y.1);
            }
            Verdict::DenyAnswered { answered_by } => {
                let to = from.clone();
                let y = self.make_yield(to, key, &answered_by, held_started_at, REASON_DENIED);
                self.announce_denial(claim, out);
                out.push(y.0, y.1);
            }
        }
    }

    /// Announce a granted claim to the channel as the policy says: the
    /// claim relayed, or a FLOOR_CLAIMED.
    pub(super) fn announce_grant(&mut self, claim: ClaimReq<N>, out: &mut Sends<N>) {
        let msg = match self.rules.announce {
            Announce::RelayEvery => claim.relayed(),
            Announce::FloorClaimedOnGrant => ServerMsg::FloorClaimed {
                msg_id: claim.msg_id,
                channel: claim.channel,
                holder: claim.from,
                started_at: claim.started_at,
            },
        };
        self.fan_out(msg, out);
    }

    /// Announce a denied claim: relayed only when the policy relays every
    /// claim.
    pub(super) fn announce_denial(&mut self, claim: ClaimReq<N>, out: &mut Sends<N>) {
        if self.rules.announce == Announce::RelayEvery {
            self.fan_out(claim.relayed(), out);
        }
    }

    pub(super) fn insert_claim(
        &mut self,
        channel: &N::Dest,
        msg_id: &N::Msg,
        holder: &N::Agent,
        started_at: Stamp,
        order: Stamp,
        now: u64,
    ) {
        let deadline = now.saturating_add(self.cfg.ttl_ms);
        let never = self.cfg.ttl_ms == NEVER;
        self.next_seq += 1;
        let seq = self.next_seq;
        let claim = Claim {
            holder: holder.clone(),
            started_at,
            order,
            granted_at: now,
            deadline,
            seq,
            answered: false,
        };
        let key = (channel.clone(), msg_id.clone());
        if !never {
            self.deadlines.insert((deadline, seq), key.clone());
        }
        let held = self.held_by.entry(holder.clone()).or_default();
        if let Err(i) = held.binary_search(&key) {
            held.insert(i, key.clone());
        }
        self.claims.insert(key, claim);
        self.live += 1;
    }

    /// Drop `key` from the live claims `holder` holds.
    pub(super) fn unhold(&mut self, holder: &N::Agent, key: &Key<N>) {
        if let Some(held) = self.held_by.get_mut(holder)
            && let Ok(i) = held.binary_search(key)
        {
            held.remove(i);
        }
    }

    /// Remove an entry (live claim or marker) and every index of it.
    pub(super) fn remove_claim(&mut self, key: &Key<N>) -> Option<Claim<N::Agent>> {
        let c = self.claims.remove(key)?;
        // Removed at `now` (by a release, a reply, a displacement or a
        // disconnect; an expiry has already been audited as one): any TTL
        // above its age would have kept it until now, and no longer.
        self.ttl_audit
            .live_at(self.now.saturating_sub(c.granted_at));
        self.deadlines.remove(&(c.deadline, c.seq));
        if c.answered {
            self.markers -= 1;
        } else {
            self.live -= 1;
            self.unhold(&c.holder, key);
        }
        Some(c)
    }

    /// Turn a live claim into a tombstone marker (same deadline).
    pub(super) fn mark_answered(&mut self, key: &Key<N>) {
        let Some(c) = self.claims.get_mut(key) else {
            return;
        };
        if c.answered {
            return;
        }
        c.answered = true;
        let holder = c.holder.clone();
        self.live -= 1;
        self.markers += 1;
        self.unhold(&holder, key);
    }

    /// Release every live claim of `agent` in `channel` (no markers); the
    /// keys released.
    pub(super) fn release_all_in(&mut self, agent: &N::Agent, channel: &N::Dest) -> Vec<Key<N>> {
        let Some(held) = self.held_by.get(agent) else {
            return Vec::new();
        };
        let keys: Vec<Key<N>> = held.iter().filter(|(c, _)| c == channel).cloned().collect();
        for key in &keys {
            self.remove_claim(key);
        }
        keys
    }
}
