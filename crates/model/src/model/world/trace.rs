//! The trace: one JSON object per line, written only when asked for (an
//! untraced run builds none of it).

use super::World;

impl World<'_> {
    /// The agentchat sweep phase of this run, first line of its trace.
    pub(super) fn trace_sweep_phase(&mut self) {
        if !matches!(self.policy.rules().expiry, crate::floor::sim::Expiry::Sweep) {
            return;
        }
        let cfg = self.server.config();
        let mut line = serde_json::json!({
            "t_us": 0, "ev": "sweep_phase",
            "phase_ms": cfg.sweep_phase_ms, "drift_us": cfg.sweep_drift_us,
        });
        // The period only when it is not the real server's (older traces,
        // and every pinned one, have none).
        if cfg.sweep_every_ms != crate::floor::sim::AGENTCHAT_SWEEP_MS {
            line["every_ms"] = cfg.sweep_every_ms.into();
        }
        self.trace_line(line);
    }

    pub(super) fn trace_line(&mut self, v: serde_json::Value) {
        if let Some(buf) = self.trace.as_deref_mut() {
            // Writing JSON into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *buf, &v);
            buf.push(b'\n');
        }
    }

    /// An agent state change; `extra` builds the event's own fields (only
    /// when tracing, so untraced runs allocate nothing here).
    pub(super) fn trace_state(
        &mut self,
        agent: u32,
        m: Option<u32>,
        ev: &str,
        extra: impl FnOnce() -> serde_json::Value,
    ) {
        if self.trace.is_none() {
            return;
        }
        let extra = extra();
        let mut line = serde_json::json!({
            "t_us": self.eng.now(),
            "ev": ev,
            "agent": self.p.ids[agent as usize],
        });
        if let Some(m) = m {
            line["msg_id"] = serde_json::Value::String(self.id_of(m));
        }
        if let (Some(obj), serde_json::Value::Object(more)) = (line.as_object_mut(), extra) {
            obj.extend(more);
        }
        self.trace_line(line);
    }
}
