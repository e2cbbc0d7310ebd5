//! The floor from Python (`herdsim.floor`): the two halves of the
//! protocol as sans-IO state machines, for a Python gateway (Matrix,
//! Slack, Discord, Telegram) that owns the sockets and the clock. A thin
//! face over `herdsim_floor::{Agent, Server}`: frames in and out are the
//! wire's JSON text, times are integers of milliseconds (`Millis`), and
//! nothing is decided here.

use herdsim_lab::floor::dialect;
use herdsim_lab::floor::{
    self, AgentInput, AgentOutput, ClaimGuard, ClientConfig, Config, CsmaWindow,
    DEFAULT_CLAIM_SKEW_MS, Input, Millis, PolicyKind, Role, Sends, ServerMsg,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The longest frame read, as the example agent's bound.
const MAX_FRAME_BYTES: usize = 1 << 20;

/// The CSMA draw of a Python agent: its own seeded stream.
type Draw = Box<dyn FnMut() -> f64 + Send + Sync>;

/// The package's `InputError` (a `ValueError`) with `message`.
fn input_error(py: Python<'_>, message: String) -> PyErr {
    match py
        .import("herdsim._errors")
        .and_then(|m| m.getattr("InputError"))
        .and_then(|c| c.call1((message,)))
    {
        Ok(e) => PyErr::from_value(e),
        Err(e) => e,
    }
}

fn policy_of(py: Python<'_>, name: &str) -> PyResult<PolicyKind> {
    name.parse::<PolicyKind>().map_err(|_| {
        let names: Vec<&str> = PolicyKind::ALL.iter().map(|p| p.name()).collect();
        input_error(
            py,
            format!(
                "policy `{name}`: not a policy (one of {})",
                names.join(", ")
            ),
        )
    })
}

/// The agent half: `herdsim_floor::Agent`, its CSMA waits drawn from a
/// ChaCha8 stream seeded by `seed`.
#[pyclass(module = "herdsim._herdsim", name = "FloorAgent")]
pub struct FloorAgent {
    inner: floor::Agent<Draw>,
}

#[pymethods]
impl FloorAgent {
    #[new]
    #[pyo3(signature = (id, *, policy = "spec", ttl_ms = 45_000, csma_min_ms = 2_000, csma_max_ms = 8_000, seed = 0))]
    fn new(
        py: Python<'_>,
        id: &str,
        policy: &str,
        ttl_ms: u64,
        csma_min_ms: u64,
        csma_max_ms: u64,
        seed: u64,
    ) -> PyResult<Self> {
        let policy = policy_of(py, policy)?;
        if !floor::address::is_agent_id(id) {
            return Err(input_error(py, format!("id `{id}`: not an agent id")));
        }
        if csma_min_ms > csma_max_ms {
            return Err(input_error(
                py,
                format!("csma_min_ms {csma_min_ms} is above csma_max_ms {csma_max_ms}"),
            ));
        }
        let mut cfg = ClientConfig::new(id);
        cfg.policy = policy;
        cfg.ttl_ms = ttl_ms;
        cfg.csma = CsmaWindow {
            min_ms: csma_min_ms,
            max_ms: csma_max_ms,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let draw: Draw = Box::new(move || rng.random::<f64>());
        Ok(FloorAgent {
            inner: floor::Agent::new(cfg, draw),
        })
    }

    /// A frame from the server (herdsim's wire, or a real agentchat
    /// server's: read through the dialect). `True` if the floor reads it
    /// (a MSG, a claim, a YIELD, a release, an ERROR); other frames
    /// (presence, replays, notices, garbage) are ignored.
    fn frame(&mut self, now_ms: u64, frame: &str) -> bool {
        match dialect::server_msg(frame, MAX_FRAME_BYTES) {
            Some(msg) => {
                self.inner
                    .handle_input(Millis(now_ms), AgentInput::Frame(&msg));
                true
            }
            None => false,
        }
    }

    /// The agent would like to answer this MSG frame; the floor decides
    /// whether and when. `False` if the frame is no MSG.
    fn answer(&mut self, now_ms: u64, frame: &str) -> bool {
        match dialect::server_msg(frame, MAX_FRAME_BYTES) {
            Some(msg @ ServerMsg::Msg { .. }) => {
                self.inner
                    .handle_input(Millis(now_ms), AgentInput::Answer(&msg));
                true
            }
            _ => false,
        }
    }

    /// The inference for `msg_id` finished with `content`.
    #[pyo3(signature = (now_ms, msg_id, content, reply_id = None))]
    fn inference_done(&mut self, now_ms: u64, msg_id: &str, content: &str, reply_id: Option<&str>) {
        let done = AgentInput::InferenceDone {
            msg_id,
            reply_id,
            content,
        };
        self.inner.handle_input(Millis(now_ms), done);
    }

    /// The time of `poll_timeout()` has come.
    fn timeout(&mut self, now_ms: u64) {
        self.inner.handle_input(Millis(now_ms), AgentInput::Timeout);
    }

    /// The connection was lost and is back: everything is forgotten.
    fn reset(&mut self, now_ms: u64) {
        self.inner.handle_input(Millis(now_ms), AgentInput::Reset);
    }

    /// The next thing to do as a dict (`type`: `transmit` with `frame`,
    /// `start_inference` with `msg_id`, `started_at`, `exempt`,
    /// `abort_inference` with `msg_id`, `winner`, `skipped` with `msg_id`,
    /// `reason`), or `None`.
    fn poll_output<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(out) = self.inner.poll_output() else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        match out {
            AgentOutput::Transmit(msg) => {
                d.set_item("type", "transmit")?;
                d.set_item("frame", msg.to_json_string())?;
            }
            AgentOutput::StartInference {
                msg_id,
                started_at,
                exempt,
            } => {
                d.set_item("type", "start_inference")?;
                d.set_item("msg_id", msg_id)?;
                d.set_item("started_at", started_at.as_ms())?;
                d.set_item("exempt", exempt)?;
            }
            AgentOutput::AbortInference { msg_id, winner } => {
                d.set_item("type", "abort_inference")?;
                d.set_item("msg_id", msg_id)?;
                d.set_item("winner", winner)?;
            }
            AgentOutput::Skipped { msg_id, reason } => {
                d.set_item("type", "skipped")?;
                d.set_item("msg_id", msg_id)?;
                d.set_item("reason", reason.as_str())?;
            }
            _ => d.set_item("type", "unknown")?,
        }
        Ok(Some(d))
    }

    /// When to call `timeout`, in ms, or `None`.
    fn poll_timeout(&self) -> Option<u64> {
        self.inner.poll_timeout().map(Millis::as_ms)
    }

    /// The agent's id.
    #[getter]
    fn id(&self) -> String {
        self.inner.config().id.clone()
    }
}

/// The server half: `herdsim_floor::Server`. Each call returns what to
/// send: a list of (recipient id, JSON frame).
#[pyclass(module = "herdsim._herdsim", name = "FloorServer")]
pub struct FloorServer {
    inner: floor::Server,
    sends: Sends,
}

type Out = Vec<(String, String)>;

/// `who` must be an agent id, as `herdsim arbitrate` and the agent half
/// require (non-empty, no spaces, not starting with `#` or `@`): a name
/// the wire could not carry would make sends nobody can address.
fn agent_id(py: Python<'_>, what: &str, who: &str) -> PyResult<()> {
    if floor::address::is_agent_id(who) {
        return Ok(());
    }
    Err(input_error(
        py,
        format!(
            "{what} `{}`: not an agent id (non-empty, no spaces, not starting with `#` or `@`)",
            who.escape_debug()
        ),
    ))
}

impl FloorServer {
    fn run(&mut self, now_ms: u64, input: Input) -> Out {
        self.sends.clear();
        self.inner.handle(Millis(now_ms), input, &mut self.sends);
        let texts: Vec<String> = self
            .sends
            .payloads()
            .iter()
            .map(|m| m.to_json_string())
            .collect();
        self.sends
            .sends()
            .iter()
            .map(|(to, i)| (to.clone(), texts[*i as usize].clone()))
            .collect()
    }
}

#[pymethods]
impl FloorServer {
    #[new]
    #[pyo3(signature = (*, policy = "spec", ttl_ms = 45_000, claim_guard = None))]
    fn new(py: Python<'_>, policy: &str, ttl_ms: u64, claim_guard: Option<&str>) -> PyResult<Self> {
        let policy = policy_of(py, policy)?;
        let mut cfg = Config::for_policy(policy);
        cfg.ttl_ms = ttl_ms;
        // None: the library's default for the policy (`relayed`, `off`
        // under agentchat-0.36), as `herdsim serve`.
        if let Some(name) = claim_guard {
            cfg.claim_guard = match ClaimGuard::from_name(name, DEFAULT_CLAIM_SKEW_MS) {
                Ok(ClaimGuard::Clock { .. }) | Err(_) => {
                    return Err(input_error(
                        py,
                        format!("claim_guard `{name}`: expected \"off\" or \"relayed\""),
                    ));
                }
                Ok(guard) => guard,
            };
        }
        Ok(FloorServer {
            inner: floor::Server::new(cfg),
            sends: Sends::new(),
        })
    }

    /// `agent` joins `channel`. An `agent` that is not an agent id raises
    /// `InputError`.
    fn join(&mut self, py: Python<'_>, now_ms: u64, agent: &str, channel: &str) -> PyResult<Out> {
        agent_id(py, "agent", agent)?;
        let input = Input::Join {
            agent: agent.into(),
            channel: channel.into(),
        };
        Ok(self.run(now_ms, input))
    }

    /// `agent` leaves `channel` (its claims there are released).
    fn leave(&mut self, py: Python<'_>, now_ms: u64, agent: &str, channel: &str) -> PyResult<Out> {
        agent_id(py, "agent", agent)?;
        let input = Input::Leave {
            agent: agent.into(),
            channel: channel.into(),
        };
        Ok(self.run(now_ms, input))
    }

    /// `agent`'s connection is gone (its claims are released).
    fn disconnect(&mut self, py: Python<'_>, now_ms: u64, agent: &str) -> PyResult<Out> {
        agent_id(py, "agent", agent)?;
        let input = Input::Disconnect {
            agent: agent.into(),
        };
        Ok(self.run(now_ms, input))
    }

    /// A frame `sender` sent (JSON text); `operator`: the sender is the
    /// human operator. A `sender` that is not an agent id raises
    /// `InputError` (a bad frame is not an error: the sender gets an ERROR).
    #[pyo3(signature = (now_ms, sender, frame, *, operator = false))]
    fn frame(
        &mut self,
        py: Python<'_>,
        now_ms: u64,
        sender: &str,
        frame: &str,
        operator: bool,
    ) -> PyResult<Out> {
        agent_id(py, "sender", sender)?;
        let role = if operator {
            Role::Operator
        } else {
            Role::Agent
        };
        let input = floor::edge::decode_bytes(sender, role, frame.as_bytes());
        Ok(self.run(now_ms, input))
    }

    /// The time of `poll_timeout()` has come (claims expire).
    fn tick(&mut self, now_ms: u64) -> Out {
        self.run(now_ms, Input::Tick)
    }

    /// When to call `tick`, in ms, or `None`.
    fn poll_timeout(&self) -> Option<u64> {
        self.inner.poll_timeout().map(Millis::as_ms)
    }

    /// Who holds the floor of `msg_id` in `channel`, if anyone.
    fn holder(&self, channel: &str, msg_id: &str) -> Option<String> {
        self.inner.holder(channel, msg_id).map(|(h, _)| h.clone())
    }
}
