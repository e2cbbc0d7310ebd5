//! `agentchat-0.36`'s own gates: its channel names, flood limit,
//! identification and lurk window, rate limit and MSG targets.

use super::*;

impl<N: Naming> Server<N> {
    /// `agentchat-0.36`: a valid channel name (`isValidChannel`,
    /// `lib/protocol.ts`): `#` and 1 to 31 of `[A-Za-z0-9_-]`.
    pub(super) fn agentchat_channel_ok(&self, channel: &N::Dest) -> bool {
        is_channel(&self.names, channel) && self.names.name_len(channel) <= AGENTCHAT_CHANNEL_MAX
    }

    /// [`Config::frame_limit`]: count a frame of `agent` at `now`; `true`
    /// when it passes agentchat's flood limit.
    pub(super) fn flooded(&mut self, now: u64, agent: &N::Agent) -> bool {
        let limit = if self.unidentified.contains(agent) {
            AGENTCHAT_FRAMES_UNIDENTIFIED
        } else {
            AGENTCHAT_FRAMES_IDENTIFIED
        };
        match self.frames.get_mut(agent) {
            Some(w) => w.over(now, limit),
            None => {
                let mut w = FrameWindow::default();
                let over = w.over(now, limit);
                self.frames.insert(agent.clone(), w);
                over
            }
        }
    }

    /// `agentchat-0.36`: an agent may send once identified, out of its lurk
    /// window and within the rate limit; `false` when refused. A MSG that
    /// passes counts for the rate limit even if refused later.
    pub(super) fn agentchat_sender_ok(
        &mut self,
        now: u64,
        from: &N::Agent,
        out: &mut Sends<N>,
    ) -> bool {
        if self.unidentified.contains(from) {
            self.refuse(from, Refusal::AuthRequired, out);
            return false;
        }
        if self.lurking.contains(from) {
            self.refuse(from, Refusal::LurkMode, out);
            return false;
        }
        self.agentchat_rate_ok(now, from, out)
    }

    /// `agentchat-0.36`: the MSG rate limit (one MSG per `rate_limit_ms` per
    /// sender); `false` when refused. A MSG that passes counts for the
    /// limit even if refused later.
    pub(super) fn agentchat_rate_ok(
        &mut self,
        now: u64,
        from: &N::Agent,
        out: &mut Sends<N>,
    ) -> bool {
        // A limit of 0 refuses nothing (no difference is below 0).
        if let Some(&last) = self.last_msg.get(from)
            && now - last < self.cfg.rate_limit_ms
        {
            self.stats.rate_limited += 1;
            self.refuse(from, Refusal::RateLimited, out);
            return false;
        }
        // Set before the channel checks: a MSG refused below still counts
        // for the limit.
        match self.last_msg.get_mut(from) {
            Some(last) => *last = now,
            None => {
                self.last_msg.insert(from.clone(), now);
            }
        }
        true
    }

    /// `agentchat-0.36`: no DMs; the channel must exist and the sender be a
    /// member; `false` when refused.
    pub(super) fn agentchat_msg_target_ok(
        &mut self,
        from: &N::Agent,
        to: &N::Dest,
        dest: &Place<N::Agent>,
        out: &mut Sends<N>,
    ) -> bool {
        if matches!(dest, Place::Dm(_)) {
            // Observed on the real server (the differential test); the
            // snapshot of `handleMsg` read for this still relays DMs.
            self.refuse(from, Refusal::DirectMessage, out);
            return false;
        }
        if !self.channels.contains(to) {
            let channel = self.names.show_dest(to).to_string();
            self.refuse(from, Refusal::ChannelNotFound { channel }, out);
            return false;
        }
        if !self.is_member(from, to) {
            let channel = self.names.show_dest(to).to_string();
            self.refuse(from, Refusal::NotMember { channel }, out);
            return false;
        }
        true
    }
}
