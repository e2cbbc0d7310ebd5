//! herdsim's network face: real time and sockets, never on the
//! simulator's path.
//!
//! - [`serve`]: a WebSocket chat server around `floor::Server`;
//! - [`live`]: the agent actors against a real server with real timers,
//!   measured with the simulator's metrics (`--compare` runs the model
//!   beside it);
//! - [`observe`]: a passive channel member whose recording `calibrate`
//!   fits;
//! - [`tls`]: TLS for `live --url wss://` and `serve --tls-cert`;
//! - [`replay`]: the `arbitrate` log format, and its replay through any
//!   policy (`serve` and `arbitrate` share one event path);
//! - [`ui`]: `herdsim ui`, a local page that runs a scenario with the
//!   settings it is given (docs/ui.md).
//!
//! On the model, the reports and the lab, whose modules are re-exported
//! here under their names.

pub use herdsim_lab::{BUILD, calibrate, sweep, term, tune};
pub use herdsim_model::{
    agent, carrier, dist, engine, error, files, floor, limits, metrics, model, names, progress,
    scenario,
};
pub use herdsim_report::report;

pub mod live;
pub mod observe;
pub mod replay;
pub mod serve;
pub mod tls;
pub mod ui;
