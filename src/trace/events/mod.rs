//! The event table, one file per family of events: every event the crate
//! records, with the names of its payload slots and its meaning (the
//! families are gathered in `table.rs`'s `TABLES`). The tables
//! live with the trace, not with the modules that record them, so the trace
//! imports nothing from the modules above it; a recording site's target and
//! event are checked against these tables at compile time (`table.rs`).

pub(super) mod cleanup_group;
pub(super) mod exception;
pub(super) mod heal;
pub(super) mod io;
pub(super) mod pool;
pub(super) mod timer;
pub(super) mod wait;
pub(super) mod work;

/// One event the crate can record: where it comes from, what it is called,
/// and the names of its two payload slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventInfo {
    /// The target the event is filtered by (`work`, `timer`, ..., `syscall`).
    pub target: &'static str,
    /// The event's name.
    pub event: &'static str,
    /// The names of payload slots `a` and `b` (empty when unused).
    pub slots: [&'static str; 2],
    /// What the event means, for the reference documentation.
    pub meaning: &'static str,
}
