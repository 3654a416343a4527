//! The two renderers: text rows and Chrome/Perfetto trace-event JSON.

use std::collections::HashMap;
use std::fmt::Write as _;

use windows_sys::Win32::System::Threading::GetCurrentProcessId;

use crate::trace::events::EventInfo;
use crate::trace::table::{lookup, slot_is_hex, slot_is_signed, table_target};

use super::{clock::*, ring::*, *};

/// The table entry of each `(target, event)` seen, looked up once.
pub(super) struct Names(HashMap<(&'static str, &'static str), Option<&'static EventInfo>>);

impl Names {
    pub(super) fn new() -> Self {
        Self(HashMap::new())
    }

    /// `(name, value)` of each slot to show: named slots, then unnamed
    /// ones that hold a value; an event outside the table shows `a` and `b`.
    pub(super) fn slots(&mut self, r: &Record) -> [Option<(&'static str, u64)>; 2] {
        let info = *self.0.entry((r.target, r.event)).or_insert_with(|| lookup(r.target, r.event));
        let names = info.map_or(["", ""], |i| i.slots);
        let one = |name: &'static str, fallback: &'static str, v: u64| match name {
            "" if info.is_some() && v == 0 => None,
            "" => Some((fallback, v)),
            n => Some((n, v)),
        };
        [one(names[0], "a", r.a), one(names[1], "b", r.b)]
    }
}

pub(super) fn write_slot(out: &mut String, name: &str, v: u64) {
    if slot_is_hex(name) {
        let _ = write!(out, "{name}=0x{v:x}");
    } else if slot_is_signed(name) {
        let _ = write!(out, "{name}={}", v as i64);
    } else {
        let _ = write!(out, "{name}={v}");
    }
}

/// What the text dump says about the trace besides its rows.
pub(crate) struct Header<'a> {
    pub(crate) filter: &'a str,
    pub(crate) unknown: &'a [String],
    pub(crate) bad_capacity: Option<&'a str>,
}

pub(crate) fn render_text(snap: &Snapshot, clock: Clock, header: &Header<'_>) -> String {
    let mut out = String::with_capacity(64 + snap.records.len() * 72);
    let _ = writeln!(
        out,
        "# windows-threadpool trace: filter {:?}, {} records, capacity {}",
        header.filter,
        snap.records.len(),
        snap.capacity
    );
    if snap.dropped > 0 {
        let _ = writeln!(
            out,
            "# overflow: {} records dropped (the ring holds {}; the oldest were overwritten)",
            snap.dropped, snap.capacity
        );
    }
    if snap.incomplete > 0 {
        let _ = writeln!(
            out,
            "# {} records not shown: still being written, or abandoned by a writer the ring lapped",
            snap.incomplete
        );
    }
    if !header.unknown.is_empty() {
        let _ = writeln!(out, "# not targets, ignored: {}", header.unknown.join(", "));
    }
    if let Some(c) = header.bad_capacity {
        let _ = writeln!(out, "# {CAPACITY_VAR}={c:?} is not a capacity (1..={MAX_CAPACITY}), ignored");
    }
    out.push_str("#   elapsed(s) thread target event slots\n");
    let mut names = Names::new();
    for r in &snap.records {
        let ns = clock.ns(r.ticks);
        let _ =
            write!(out, "{:>4}.{:09} {:>6} {} {}", ns / 1_000_000_000, ns % 1_000_000_000, r.tid, r.target, r.event);
        for (name, v) in names.slots(r).into_iter().flatten() {
            out.push(' ');
            write_slot(&mut out, name, v);
        }
        out.push('\n');
    }
    out
}

pub(crate) fn dump() -> String {
    let st = state();
    let header =
        Header { filter: &st.filter_text, unknown: &st.filter.unknown, bad_capacity: st.bad_capacity.as_deref() };
    match &st.ring {
        Some(ring) => render_text(&ring.snapshot(), Clock::current(), &header),
        None => format!("# windows-threadpool trace: disarmed (set {FILTER_VAR} to a list of targets, or *)\n"),
    }
}

pub(crate) fn dump_chrome_trace() -> String {
    let snap = match &state().ring {
        Some(ring) => ring.snapshot(),
        None => Snapshot { records: Vec::new(), dropped: 0, incomplete: 0, capacity: 0 },
    };
    // SAFETY: no preconditions.
    let pid = unsafe { GetCurrentProcessId() };
    render_chrome(&snap, Clock::current(), pid)
}

pub(super) fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Microseconds with nanosecond precision, as the format wants them.
pub(super) fn json_us(out: &mut String, ns: u64) {
    let _ = write!(out, "{}.{:03}", ns / 1000, ns % 1000);
}

pub(super) fn json_args(out: &mut String, slots: [Option<(&'static str, u64)>; 2], extra: Option<&str>) {
    out.push_str(",\"args\":{");
    let mut first = true;
    for (name, v) in slots.into_iter().flatten() {
        if !first {
            out.push(',');
        }
        first = false;
        json_str(out, name);
        out.push(':');
        // Hex slots and values past f64's exact range go as strings.
        if slot_is_hex(name) {
            let _ = write!(out, "\"0x{v:x}\"");
        } else if slot_is_signed(name) && (v as i64).unsigned_abs() <= 1 << 53 {
            let _ = write!(out, "{}", v as i64);
        } else if v <= 1 << 53 {
            let _ = write!(out, "{v}");
        } else {
            let _ = write!(out, "\"{v}\"");
        }
    }
    if let Some(flag) = extra {
        if !first {
            out.push(',');
        }
        let _ = write!(out, "\"{flag}\":true");
    }
    out.push('}');
}

/// A slice opened on a thread and not yet closed.
pub(super) struct Open {
    /// Trampolines pair by target and object, syscalls by name and `a`.
    pub(super) syscall: bool,
    pub(super) target: &'static str,
    pub(super) event: &'static str,
    pub(super) rec: Record,
}

impl Open {
    pub(super) fn closes(&self, r: &Record, syscall: bool) -> bool {
        self.syscall == syscall
            && self.rec.a == r.a
            && if syscall { self.event == r.event } else { self.target == r.target }
    }
}

pub(super) struct Chrome {
    pub(super) out: String,
    pub(super) clock: Clock,
    pub(super) pid: u32,
    pub(super) names: Names,
}

impl Chrome {
    pub(super) fn head(&mut self, name: &str, cat: &str, ph: &str, tid: u32, ts: u64) {
        self.out.push_str(",\n{\"name\":");
        json_str(&mut self.out, name);
        self.out.push_str(",\"cat\":");
        json_str(&mut self.out, cat);
        let _ = write!(self.out, ",\"ph\":\"{ph}\",\"pid\":{},\"tid\":{tid},\"ts\":", self.pid);
        json_us(&mut self.out, ts);
    }

    pub(super) fn slice(&mut self, open: &Open, end: &Record, extra: Option<&str>) {
        let (name, cat) = if open.syscall {
            (open.event.to_string(), "syscall")
        } else {
            (format!("{} callback", open.target), open.target)
        };
        let (start, end) = (self.clock.ns(open.rec.ticks), self.clock.ns(end.ticks));
        self.head(&name, cat, "X", open.rec.tid, start);
        self.out.push_str(",\"dur\":");
        json_us(&mut self.out, end.saturating_sub(start));
        let slots = self.names.slots(&open.rec);
        json_args(&mut self.out, slots, extra);
        self.out.push('}');
    }

    pub(super) fn instant(&mut self, r: &Record) {
        let name = format!("{} {}", r.target, r.event);
        self.head(&name, table_target(r.target), "i", r.tid, self.clock.ns(r.ticks));
        self.out.push_str(",\"s\":\"t\"");
        let slots = self.names.slots(r);
        json_args(&mut self.out, slots, None);
        self.out.push('}');
    }
}

/// Renders the Chrome/Perfetto JSON trace-event format.
pub(crate) fn render_chrome(snap: &Snapshot, clock: Clock, pid: u32) -> String {
    let mut c = Chrome { out: String::with_capacity(256 + snap.records.len() * 160), clock, pid, names: Names::new() };
    let _ = write!(
        c.out,
        "{{\"displayTimeUnit\":\"ns\",\"otherData\":{{\"dropped\":{},\"capacity\":{}}},\"traceEvents\":[\n\
         {{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":0,\"args\":{{\"name\":\"windows-threadpool trace\"}}}}",
        snap.dropped, snap.capacity
    );
    let mut open: HashMap<u32, Vec<Open>> = HashMap::new();
    for r in &snap.records {
        let (opens, syscall) = match (r.target, r.event) {
            ("syscall-enter", _) => (true, true),
            ("syscall-leave", _) => (false, true),
            (_, "trampoline-entered") => (true, false),
            (_, "trampoline-left") => (false, false),
            _ => {
                c.instant(r);
                continue;
            }
        };
        let stack = open.entry(r.tid).or_default();
        if opens {
            stack.push(Open { syscall, target: r.target, event: r.event, rec: *r });
            continue;
        }
        match stack.iter().rposition(|o| o.closes(r, syscall)) {
            Some(p) => {
                // Anything opened after the match lost its end record.
                let inner: Vec<Open> = stack.drain(p..).collect();
                for o in inner[1..].iter().rev() {
                    c.slice(o, r, Some("end-missing"));
                }
                c.slice(&inner[0], r, None);
            }
            // Its start was dropped or cleared.
            None => c.instant(r),
        }
    }
    if let Some(last) = snap.records.last() {
        let mut tids: Vec<u32> = open.keys().copied().collect();
        tids.sort_unstable();
        for tid in tids {
            for o in open[&tid].iter().rev() {
                c.slice(o, last, Some("unfinished"));
            }
        }
    }
    c.out.push_str("\n]}\n");
    c.out
}
