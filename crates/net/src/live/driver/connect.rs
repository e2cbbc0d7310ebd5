//! Connecting a replication: who is who on the wire (names, keys, the ids
//! the server gives), and the connections opened and joined in order.

use super::super::conn::{self, Events, Identity, Link};
use super::super::keys::Secret;
use super::names::Names;
use super::{LiveError, OPERATOR};
use crate::model::Prepared;

/// The IDENTIFY identities: the operator's first, then the agents' in
/// order (with their key derived from the user's secret when keyed).
pub(super) fn identities(keyed: Option<&Secret>, ids: &[String]) -> Vec<Identity> {
    let key = |name: &str| keyed.map(|s| s.key_of(name));
    std::iter::once(OPERATOR)
        .chain(ids.iter().map(String::as_str))
        .map(|name| Identity {
            name: name.to_string(),
            key: key(name),
        })
        .collect()
}

/// The connections of a replication, opened and joined.
pub(super) struct Opened {
    /// Connection 0 is the operator, 1..=n the agents.
    pub(super) links: Vec<Option<Link>>,
    /// Each agent's channels.
    pub(super) channels: Vec<Vec<String>>,
    /// The id the server gave each connection (operator first).
    pub(super) wire_ids: Vec<String>,
}

/// Connect and join, one after another: the operator first, then the
/// agents in order.
pub(super) fn connect_all(
    p: &Prepared,
    handle: &tokio::runtime::Handle,
    url: &str,
    tls: Option<&std::sync::Arc<rustls::ClientConfig>>,
    idents: &[Identity],
    tx: &Events,
) -> Result<Opened, LiveError> {
    let n = p.agents();
    let mut links = Vec::with_capacity(n + 1);
    let mut channels = Vec::with_capacity(n);
    let op_channel = vec![p.channel().to_string()];
    let (op_link, op_id) = handle
        .block_on(conn::open(
            url,
            tls,
            &idents[0],
            &op_channel,
            0,
            0,
            tx.clone(),
        ))
        .map_err(LiveError::Connection)?;
    links.push(Some(op_link));
    let mut wire_ids = vec![op_id];
    for i in 0..n {
        let chans = p.channels(i).to_vec();
        let (link, id) = handle
            .block_on(conn::open(
                url,
                tls,
                &idents[i + 1],
                &chans,
                i + 1,
                0,
                tx.clone(),
            ))
            .map_err(LiveError::Connection)?;
        links.push(Some(link));
        wire_ids.push(id);
        channels.push(chans);
    }
    Ok(Opened {
        links,
        channels,
        wire_ids,
    })
}

/// Who is who on the wire: the names, the identities, the ids the server
/// knows them by, and the open connections.
pub(super) struct Wiring {
    /// The agents' names (`agent-NNN`).
    pub(super) ids: Vec<String>,
    /// The IDENTIFY identities, operator first.
    pub(super) idents: Vec<Identity>,
    /// The mapping to and from the server's ids.
    pub(super) names: Names,
    pub(super) opened: Opened,
}

/// The name mapping: each name the server knows under another id (a keyed
/// identity's, or one a server assigns), operator first, then the agents.
/// Empty when the server kept the names (`herdsim serve` without keys).
pub(super) fn wire_names(ids: &[String], wire_ids: &[String]) -> Names {
    let mut names = Names::default();
    let mine = std::iter::once(OPERATOR.to_string()).chain(ids.iter().cloned());
    for (name, wire) in mine.zip(wire_ids.iter()) {
        if &name != wire {
            names.to_wire.insert(name.clone(), wire.clone());
            names.from_wire.insert(wire.clone(), name);
        }
    }
    names
}
