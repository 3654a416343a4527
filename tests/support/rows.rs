//! Reading a text trace dump back as rows, for the tests that check the
//! records an object leaves (`#[path = "support/rows.rs"] mod rows;` under
//! `#[cfg(feature = "trace")]`, in a `support::traced_child` scenario).
//!
//! An object's life is read by selecting its rows (its target, and the
//! syscalls whose slots name it), then asserting the order within one thread,
//! where records follow program order, and across threads only where one
//! record happens before another (a callback is entered after the call that
//! armed it began; a drain returns after the callbacks it waits for left).
#![allow(dead_code)]

use std::collections::BTreeMap;

/// One row of `trace::dump()`. `index` is its position in the dump, which
/// orders all records (and each thread's records in program order).
#[derive(Debug, Clone)]
pub struct Row {
    pub index: usize,
    /// Elapsed time, in nanoseconds since the trace's clock started.
    pub ns: u64,
    pub tid: u32,
    pub target: String,
    pub event: String,
    pub slots: Vec<(String, u64)>,
}

impl Row {
    pub fn is(&self, target: &str, event: &str) -> bool {
        self.target == target && self.event == event
    }

    pub fn slot(&self, name: &str) -> Option<u64> {
        self.slots.iter().find(|(n, _)| n == name).map(|s| s.1)
    }

    /// A slot holding a signed value (a raw due time).
    pub fn signed(&self, name: &str) -> Option<i64> {
        self.slot(name).map(|v| v as i64)
    }

    /// `target event`, for comparing sequences.
    pub fn label(&self) -> String {
        format!("{} {}", self.target, self.event)
    }

    pub fn is_syscall(&self) -> bool {
        self.target == "syscall-enter" || self.target == "syscall-leave"
    }
}

/// Parses the rows of a text dump (header lines start with `#`), checking
/// the format of each (elapsed seconds with nine decimals, thread, target,
/// event, `name=value` slots in decimal or `0x` hex).
pub fn rows(dump: &str) -> Vec<Row> {
    dump.lines()
        .filter(|l| !l.starts_with('#'))
        .enumerate()
        .map(|(index, line)| {
            let mut f = line.split_whitespace();
            let mut next = || f.next().unwrap_or_else(|| panic!("short row {line:?}"));
            let (secs, frac) = next().split_once('.').unwrap_or_else(|| panic!("elapsed in {line:?}"));
            assert_eq!(frac.len(), 9, "{line:?}");
            let ns = secs.parse::<u64>().unwrap() * 1_000_000_000 + frac.parse::<u64>().unwrap();
            let tid = next().parse().unwrap_or_else(|_| panic!("thread in {line:?}"));
            let (target, event) = (next().to_string(), next().to_string());
            let slots = f
                .map(|s| {
                    let (name, v) = s.split_once('=').unwrap_or_else(|| panic!("slot {s:?} in {line:?}"));
                    let v = match v.strip_prefix("0x") {
                        Some(hex) => u64::from_str_radix(hex, 16),
                        // Signed slots (a raw due time) print as i64.
                        None => v.parse().or_else(|_| v.parse::<i64>().map(|x| x as u64)),
                    };
                    (name.to_string(), v.unwrap_or_else(|_| panic!("value of {s:?} in {line:?}")))
                })
                .collect();
            Row { index, ns, tid, target, event, slots }
        })
        .collect()
}

pub fn thread_id() -> u32 {
    // SAFETY: no preconditions.
    unsafe { windows_sys::Win32::System::Threading::GetCurrentThreadId() }
}

/// The labels of `rows`, in order.
pub fn labels(rows: &[&Row]) -> Vec<String> {
    rows.iter().map(|r| r.label()).collect()
}

/// Splits the rows run on threads other than `main` into callbacks: each
/// runs from a `trampoline-entered` to the next row on its thread that starts
/// another one. Returned in the order the callbacks were entered.
pub fn callbacks<'a>(rows: &[&'a Row], main: u32) -> Vec<Vec<&'a Row>> {
    let mut open: BTreeMap<u32, usize> = BTreeMap::new();
    let mut out: Vec<Vec<&Row>> = Vec::new();
    for &r in rows.iter().filter(|r| r.tid != main) {
        if r.event == "trampoline-entered" {
            open.insert(r.tid, out.len());
            out.push(vec![r]);
        } else {
            let at = *open.get(&r.tid).unwrap_or_else(|| panic!("{r:?} on a pool thread outside any callback"));
            out[at].push(r);
        }
    }
    out
}

/// Asserts that every syscall-enter in `rows` (one thread's rows of one
/// object) is followed by its leave, with the same slots, before any other
/// row of the object.
#[track_caller]
pub fn assert_bracketed(rows: &[&Row]) {
    for (i, r) in rows.iter().enumerate() {
        if r.target == "syscall-enter" {
            let next = rows.get(i + 1).unwrap_or_else(|| panic!("{r:?} never left: {rows:#?}"));
            assert!(next.is("syscall-leave", &r.event) && next.slots == r.slots, "{r:?} is closed by {next:?}");
        }
        if r.target == "syscall-leave" {
            assert!(i > 0 && rows[i - 1].is("syscall-enter", &r.event), "{r:?} without its enter: {rows:#?}");
        }
    }
}

/// The one row of `rows` that is `target event`.
#[track_caller]
pub fn find<'a>(rows: &[&'a Row], target: &str, event: &str) -> &'a Row {
    let found: Vec<&Row> = rows.iter().copied().filter(|r| r.is(target, event)).collect();
    assert_eq!(found.len(), 1, "expected one `{target} {event}` in {rows:#?}");
    found[0]
}
