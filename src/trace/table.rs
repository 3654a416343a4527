//! The event table: every event the crate records, the targets a filter can
//! name, and the compile-time checks the recording macros run against them.

use super::events::{self, EventInfo};

/// Every family's table, in the order the reference lists them. A new
/// family adds its file above and its table here.
pub(super) const TABLES: &[&[EventInfo]] = &[
    events::work::EVENTS,
    events::pool::EVENTS,
    events::timer::EVENTS,
    events::wait::EVENTS,
    events::io::EVENTS,
    events::cleanup_group::EVENTS,
    events::heal::EVENTS,
    events::exception::EVENTS,
];

/// Every event the crate can emit, in table order. `syscall` events are
/// recorded twice per call, under the targets `syscall-enter` and
/// `syscall-leave`.
pub fn events() -> impl Iterator<Item = &'static EventInfo> {
    TABLES.iter().flat_map(|t| t.iter())
}

/// Every target a filter can name: the event table's targets in table
/// order, then `syscall-enter` and `syscall-leave` (a table's `syscall`
/// events are recorded under both; `syscall` in a filter stands for both).
/// Derived from the table at compile time, so a target cannot be recorded
/// without a filter bit.
pub const TARGETS: &[&str] = &targets();

/// The number of targets: the distinct table targets other than `syscall`,
/// and the two syscall targets.
const TARGET_COUNT: usize = {
    let mut n = 2;
    let mut i = 0;
    while i < EVENT_COUNT {
        if first_of_its_target(i) {
            n += 1;
        }
        i += 1;
    }
    n
};

/// The number of events in the table.
const EVENT_COUNT: usize = {
    let (mut n, mut t) = (0, 0);
    while t < TABLES.len() {
        n += TABLES[t].len();
        t += 1;
    }
    n
};

/// The `i`th event of the table, in table order.
const fn nth_event(mut i: usize) -> &'static EventInfo {
    let mut t = 0;
    while i >= TABLES[t].len() {
        i -= TABLES[t].len();
        t += 1;
    }
    &TABLES[t][i]
}

/// Whether the `i`th event names a target (not `syscall`) no earlier event names.
const fn first_of_its_target(i: usize) -> bool {
    let target = nth_event(i).target;
    if str_eq(target, "syscall") {
        return false;
    }
    let mut j = 0;
    while j < i {
        if str_eq(nth_event(j).target, target) {
            return false;
        }
        j += 1;
    }
    true
}

const fn targets() -> [&'static str; TARGET_COUNT] {
    let mut out = [""; TARGET_COUNT];
    let (mut n, mut i) = (0, 0);
    while i < EVENT_COUNT {
        if first_of_its_target(i) {
            out[n] = nth_event(i).target;
            n += 1;
        }
        i += 1;
    }
    out[n] = "syscall-enter";
    out[n + 1] = "syscall-leave";
    out
}

/// Slot names whose values are addresses, handles of pool objects or codes:
/// rows print them in hexadecimal, every other slot in decimal.
pub const HEX_SLOTS: &[&str] = &[
    "work",
    "pool",
    "timer",
    "wait",
    "io",
    "group",
    "context",
    "environment",
    "instance",
    "overlapped",
    "address",
    "code",
    "event",
];

/// Slot names whose values are signed (a raw due time: negative is relative):
/// rows print them as `i64`.
pub const SIGNED_SLOTS: &[&str] = &["due"];

/// Whether a slot called `name` is printed as a signed number.
#[cfg_attr(not(any(test, feature = "trace")), allow(dead_code))]
pub(crate) fn slot_is_signed(name: &str) -> bool {
    SIGNED_SLOTS.contains(&name)
}

/// Whether a slot called `name` is printed in hexadecimal.
#[cfg_attr(not(any(test, feature = "trace")), allow(dead_code))]
pub(crate) fn slot_is_hex(name: &str) -> bool {
    HEX_SLOTS.contains(&name)
}

pub(super) const fn str_eq(a: &str, b: &str) -> bool {
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

/// The table target an event is listed under: `syscall-enter` and
/// `syscall-leave` records are listed once, as `syscall`.
pub(super) const fn table_target(target: &str) -> &str {
    if str_eq(target, "syscall-enter") || str_eq(target, "syscall-leave") { "syscall" } else { target }
}

/// The table entry for `(target, event)`, if any.
pub(super) const fn lookup(target: &str, event: &str) -> Option<&'static EventInfo> {
    let target = table_target(target);
    let mut t = 0;
    while t < TABLES.len() {
        let mut i = 0;
        while i < TABLES[t].len() {
            if str_eq(TABLES[t][i].target, target) && str_eq(TABLES[t][i].event, event) {
                return Some(&TABLES[t][i]);
            }
            i += 1;
        }
        t += 1;
    }
    None
}

/// Whether `(target, event)` is in the table; `syscall-enter`/`syscall-leave`
/// records are listed once under `syscall`. Evaluated at compile time by the
/// recording macros, so recording an unlisted event does not build.
pub(crate) const fn known(target: &str, event: &str) -> bool {
    lookup(target, event).is_some()
}

/// Bit of the filter word for targets outside [`TARGETS`] (only `*` sets it).
#[cfg_attr(not(any(test, feature = "trace")), allow(dead_code))]
pub(super) const OTHER_BIT: u32 = 1 << TARGETS.len();

/// The filter bits that arm `target`: its own bit, both syscall bits for
/// `syscall`, and [`OTHER_BIT`] for a target the crate does not know.
#[cfg_attr(not(any(test, feature = "trace")), allow(dead_code))]
pub(crate) const fn target_mask(target: &str) -> u32 {
    if str_eq(target, "syscall") {
        return target_mask("syscall-enter") | target_mask("syscall-leave");
    }
    let mut i = 0;
    while i < TARGETS.len() {
        if str_eq(TARGETS[i], target) {
            return 1 << i;
        }
        i += 1;
    }
    OTHER_BIT
}

/// The reference table of every event, as `docs/trace.md` carries it between
/// its `BEGIN`/`END GENERATED EVENT TABLE` markers.
#[cfg(test)]
pub(crate) fn reference_markdown() -> String {
    let mut out = String::new();
    out.push_str("| target | event | slot `a` | slot `b` | meaning |\n|---|---|---|---|---|\n");
    let slot = |s: &str| match s {
        "" => String::new(),
        s if slot_is_hex(s) => format!("`{s}` (hex)"),
        s if slot_is_signed(s) => format!("`{s}` (signed)"),
        s => format!("`{s}`"),
    };
    for e in events() {
        let meaning = match (e.target, e.meaning) {
            ("syscall", "") => format!("`{}` was called (`syscall-enter`) or returned (`syscall-leave`)", e.event),
            (_, m) => m.to_string(),
        };
        out.push_str(&format!(
            "| `{}` | `{}` | {} | {} | {} |\n",
            e.target,
            e.event,
            slot(e.slots[0]),
            slot(e.slots[1]),
            meaning.replace('|', "\\|")
        ));
    }
    out
}
