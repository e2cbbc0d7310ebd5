//! The agent side. TODO(helper): implement.
