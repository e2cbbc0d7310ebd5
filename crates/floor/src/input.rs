//! What the server takes in: an [`Input`] (a client's message with its
//! sender's [`Role`], or a connection event) at a time, through
//! [`crate::Server::handle`]. The transport's edge makes them from frames
//! ([`crate::edge::decode`]).

use crate::naming::{Naming, Text};
use crate::wire::{ClientMsg, DecodeError};

/// Who sent a client message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Role {
    /// An agent: may claim, may be yielded.
    Agent,
    /// The human operator: its claim takes the floor (see the module
    /// docs); it is never yielded.
    Operator,
}

impl Role {
    /// `agent` or `operator` (the role's name in a log line).
    pub const fn as_str(self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Operator => "operator",
        }
    }
}

/// One input to the server, handled at a given server time.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Input<N: Naming = Text> {
    /// A message a client sent.
    Client {
        /// The sender.
        from: N::Agent,
        /// Whether the sender is an agent or the operator.
        role: Role,
        /// What it sent.
        msg: ClientMsg<N>,
    },
    /// The agent joins a channel (nothing is sent).
    Join {
        /// Who joins.
        agent: N::Agent,
        /// The channel joined.
        channel: N::Dest,
    },
    /// The agent leaves a channel (nothing is sent). Under the policies with
    /// [`crate::sim::Rules::leave_releases`] its claims in that channel are released.
    Leave {
        /// Who leaves.
        agent: N::Agent,
        /// The channel left.
        channel: N::Dest,
    },
    /// The agent's connection is gone: it leaves every channel and all its
    /// claims are released.
    Disconnect {
        /// Whose connection is gone.
        agent: N::Agent,
    },
    /// Only "time is now T": run due timers (expiry, sweeps).
    Tick,
    /// A new connection for `agent` that has not identified yet. Agents
    /// herdsim has never seen count as identified (the simulator's agents
    /// always are); this input makes one that is not. Under `agentchat-0.36`
    /// its claims are dropped silently and its MSGs and JOINs get
    /// `AUTH_REQUIRED`, until `Identify`. Other policies ignore it.
    Connect {
        /// The agent id the connection will identify as.
        agent: N::Agent,
    },
    /// A frame from `from` that did not decode ([`crate::edge::decode`]):
    /// answered with an ERROR as the policy words it
    /// ([`crate::edge::refusal`]); `claim`: it was meant as a RESPONDING_TO
    /// (counted in [`crate::Stats::claims_received`]).
    Undecodable {
        /// The sender.
        from: N::Agent,
        /// Why it did not decode.
        error: DecodeError,
        /// It was a RESPONDING_TO.
        claim: bool,
    },
    /// The agent identifies; `lurk`: as a new identity in agentchat's lurk
    /// window (it may claim, but its MSGs get `LURK_MODE`). Under other
    /// policies it changes nothing.
    Identify {
        /// Who identifies.
        agent: N::Agent,
        /// A new identity in the lurk window.
        lurk: bool,
    },
}
