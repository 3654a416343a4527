//! The event table, one file per family of events: every event the crate
//! records, with the names of its payload slots and its meaning. The tables
//! live with the trace, not with the modules that record them, so the trace
//! imports nothing from the modules above it; a recording site's target and
//! event are checked against these tables at compile time (`table.rs`).

mod cleanup_group;
mod exception;
mod heal;
mod io;
mod pool;
mod timer;
mod wait;
mod work;

use super::EventInfo;

/// Every family's table, in the order the reference lists them. A new
/// family adds its file above and its table here.
pub(super) const TABLES: &[&[EventInfo]] = &[
    work::EVENTS,
    pool::EVENTS,
    timer::EVENTS,
    wait::EVENTS,
    io::EVENTS,
    cleanup_group::EVENTS,
    heal::EVENTS,
    exception::EVENTS,
];
