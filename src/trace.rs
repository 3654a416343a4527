//! An allocation-free in-process record of what the crate does.
//!
//! (Placeholder: the recorder lands with the trace issue. The macros and the
//! event table below are the interface every object type records through.)

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

/// Every per-module table of events.
const TABLES: &[&[EventInfo]] = &[crate::pool::TRACE_EVENTS, crate::work::TRACE_EVENTS, crate::io::TRACE_EVENTS];

/// Every event the crate can emit, in table order.
pub fn events() -> impl Iterator<Item = &'static EventInfo> {
    TABLES.iter().flat_map(|t| t.iter())
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Whether `(target, event)` is in the table; `syscall-enter`/`syscall-leave`
/// records are listed once under `syscall`. Evaluated at compile time by the
/// recording macros, so recording an unlisted event does not build.
#[doc(hidden)]
pub const fn known(target: &str, event: &str) -> bool {
    let target = if str_eq(target, "syscall-enter") || str_eq(target, "syscall-leave") { "syscall" } else { target };
    let mut t = 0;
    while t < TABLES.len() {
        let mut i = 0;
        while i < TABLES[t].len() {
            if str_eq(TABLES[t][i].target, target) && str_eq(TABLES[t][i].event, event) {
                return true;
            }
            i += 1;
        }
        t += 1;
    }
    false
}

/// Whether recording is on for `target` (one relaxed load when disarmed).
#[doc(hidden)]
#[inline]
pub fn armed_for(_target: &str) -> bool {
    false
}

/// Records one event. Allocation-free.
pub fn record(_target: &'static str, _event: &'static str, _a: u64, _b: u64) {}

/// Records `($target, $event, $a, $b)` when the `trace` feature is on and the
/// filter wants `$target`; with the feature off it compiles to nothing. The
/// event must be listed in the event table (checked at compile time).
macro_rules! trace_record {
    ($target:literal, $event:literal, $a:expr, $b:expr) => {{
        const _: () = assert!(
            $crate::trace::known($target, $event),
            concat!("trace event missing from the event table: ", $target, " ", $event)
        );
        #[cfg(feature = "trace")]
        if $crate::trace::armed_for($target) {
            $crate::trace::record($target, $event, ($a) as u64, ($b) as u64);
        }
        #[cfg(not(feature = "trace"))]
        if false {
            let _ = (&$a, &$b);
        }
    }};
}

/// Brackets a Win32 call with `syscall-enter`/`syscall-leave` records, so a
/// call issued late can be told from one that took long to return.
macro_rules! trace_call {
    ($name:literal, $a:expr, $b:expr, $body:block) => {{
        trace_record!("syscall-enter", $name, $a, $b);
        let r = $body;
        trace_record!("syscall-leave", $name, $a, $b);
        r
    }};
}
