//! An allocation-free in-process record of what the crate does.
//!
//! Build with the `trace` feature and set `WINDOWS_THREADPOOL_TRACE` to a
//! comma-separated list of targets (`*` for all of them); [`dump`] then
//! returns one row per record and [`dump_chrome_trace`] a timeline for
//! Perfetto. `docs/trace.md` is the user's guide and lists every event.
//!
//! ```
//! use windows_threadpool::{trace, ThreadpoolWork};
//!
//! let work = ThreadpoolWork::new(|| {}, None)?;
//! work.submit();
//! work.wait();
//! drop(work);
//! // With the variable unset (as here) or the feature off, nothing was kept.
//! if trace::enabled() {
//!     print!("{}", trace::dump());
//! } else {
//!     assert!(!trace::dump().contains("work submitted"));
//! }
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Design
//!
//! **Recording sites.** The crate records through two internal macros:
//! `trace_record!("work", "submitted", a, b)` and
//! `trace_call!("SubmitThreadpoolWork", a, b, { the call })`, which brackets a
//! Win32 call with `syscall-enter` and `syscall-leave` records. Target and
//! event are string literals, checked at compile time against the **event
//! table** ([`events`]), the one list of every event with the names of its
//! two payload slots. Each module that records keeps its part of the table in
//! a `TRACE_EVENTS` constant listed in `TABLES`. The table is what [`dump`]
//! names the slots with and what the reference section of `docs/trace.md` is
//! generated from, so a row, the documentation and the code cannot disagree.
//! Without the feature the macros expand to dead code that evaluates nothing
//! (a `const fn` at the bottom of this file uses them, which proves it).
//!
//! **Arming.** One `AtomicU32` holds a bit per target plus an "uninitialised"
//! bit, and starts with every bit set. A recording site tests its target's bit
//! (a compile-time constant) with one relaxed load: when the trace is
//! disarmed the word is zero and that load is the whole cost. The first test
//! finds the uninitialised bit and takes the slow path once: it reads the
//! filter (and `WINDOWS_THREADPOOL_TRACE_CAPACITY`), allocates the ring if
//! armed, installs the exception observer, and publishes the real mask.
//!
//! **The ring.** A fixed array of 64-byte slots (one cache line each) and a
//! global `head` counter. A record takes its index with one `fetch_add`, so
//! indices order all records (and each thread's records in program order).
//! Slot `index % capacity` holds it; when the ring is full that overwrites the
//! record `capacity` places older, in constant time. The number of dropped
//! records is implied by `head` and need not be counted on the hot path.
//! Each slot carries a sequence word that doubles as a per-slot seqlock:
//! a writer claims the slot by compare-and-swap from an even (complete) value
//! older than its own index to `2 * index + 1`, stores the fields, then
//! publishes `2 * index + 2`. A reader accepts slot contents only if the
//! sequence equals `2 * index + 2` before and after reading the fields, so a
//! dump running concurrently with writers never shows a torn record. A writer
//! never waits: if the slot is mid-write by a writer a whole lap behind
//! (preempted while `capacity` records were made), it abandons its record,
//! and a dump counts that index as incomplete rather than show a mixture.
//! No lock, no allocation, no formatting on the record path; the fields are
//! atomics so that a racing read is not a data race.
//!
//! **Time.** Records store raw `QueryPerformanceCounter` ticks: documented,
//! monotonic, 100 ns or finer (`QueryInterruptTime` would abort under Wine 8,
//! and the unbiased interrupt time moves only once per clock tick). The
//! trace's clock starts at the earliest record or at the installation of the
//! exception observer, whichever came first; rows show time elapsed since then.
//!
//! **Exceptions.** [`observe_exceptions`] installs a vectored exception
//! handler at the front of the list, so it runs before any handler
//! registered earlier; it records the first-chance exception and declines
//! it, so an exception that something then swallows still leaves a trace.
//!
//! **Dumps** take a snapshot (reading each index in the window once) and
//! format it; all allocation happens there, never while recording.
//!
//! **Adding an event**: list it in the module's `TRACE_EVENTS` (a new module
//! also goes into `TABLES`, and its file into the source scan in
//! `trace/tests.rs`), record it with `trace_record!`, and run
//! `cargo xtask trace-doc` to regenerate the reference in `docs/trace.md`.
//! A slot that holds an address or a code prints in hex if its name is in
//! [`HEX_SLOTS`].

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

/// The events this module records itself.
pub(crate) const TRACE_EVENTS: &[EventInfo] = &[EventInfo {
    target: "exception",
    event: "raised",
    slots: ["code", "address"],
    meaning: "a first-chance exception was raised on this thread; the observer recorded it and declined to handle it",
}];

/// Every per-module table of events, in the order the reference lists them.
/// A module that records adds its `TRACE_EVENTS` here.
const TABLES: &[&[EventInfo]] = &[
    crate::work::TRACE_EVENTS,
    crate::pool::TRACE_EVENTS,
    crate::timer::TRACE_EVENTS,
    crate::wait::TRACE_EVENTS,
    crate::io::TRACE_EVENTS,
    crate::cleanup_group::TRACE_EVENTS,
    crate::heal::TRACE_EVENTS,
    TRACE_EVENTS,
];

/// Every event the crate can emit, in table order. `syscall` events are
/// recorded twice per call, under the targets `syscall-enter` and
/// `syscall-leave`.
pub fn events() -> impl Iterator<Item = &'static EventInfo> {
    TABLES.iter().flat_map(|t| t.iter())
}

/// Every target a filter can name. `syscall` in a filter stands for both
/// `syscall-enter` and `syscall-leave`.
pub const TARGETS: [&str; 11] = [
    "work",
    "pool",
    "timer",
    "timer-periodic",
    "wait",
    "io",
    "group",
    "heal",
    "exception",
    "syscall-enter",
    "syscall-leave",
];

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

/// The table target an event is listed under: `syscall-enter` and
/// `syscall-leave` records are listed once, as `syscall`.
const fn table_target(target: &str) -> &str {
    if str_eq(target, "syscall-enter") || str_eq(target, "syscall-leave") { "syscall" } else { target }
}

/// The table entry for `(target, event)`, if any.
const fn lookup(target: &str, event: &str) -> Option<&'static EventInfo> {
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
const OTHER_BIT: u32 = 1 << TARGETS.len();

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

/// Whether the trace records anything at all: the `trace` feature is on and
/// `WINDOWS_THREADPOOL_TRACE` names at least one target.
pub fn enabled() -> bool {
    #[cfg(feature = "trace")]
    {
        imp::mask() != 0
    }
    #[cfg(not(feature = "trace"))]
    {
        false
    }
}

/// Whether records of `target` are kept. `syscall` asks for either syscall
/// target; a target the crate does not know is kept only under `*`.
pub fn wants(target: &str) -> bool {
    #[cfg(feature = "trace")]
    {
        imp::armed(target_mask(target))
    }
    #[cfg(not(feature = "trace"))]
    {
        let _ = target;
        false
    }
}

/// Records one event if the filter [`wants`] its target. Allocation-free and
/// lock-free. An event missing from the table is kept, and its slots print
/// as `a=` and `b=`.
pub fn record(target: &'static str, event: &'static str, a: u64, b: u64) {
    #[cfg(feature = "trace")]
    if wants(target) {
        imp::push(target, event, a, b);
    }
    #[cfg(not(feature = "trace"))]
    let _ = (target, event, a, b);
}

/// The records kept so far, oldest first, one row each:
/// `elapsed-seconds thread target event slot=value ...`, after a few `#`
/// header lines (filter, counts, and an overflow notice if records were
/// dropped). When the trace is disarmed, one header line saying so; without
/// the `trace` feature, empty.
pub fn dump() -> String {
    #[cfg(feature = "trace")]
    {
        imp::dump()
    }
    #[cfg(not(feature = "trace"))]
    {
        String::new()
    }
}

/// The records kept so far as Chrome/Perfetto trace-event JSON: callbacks
/// (`trampoline-entered`..`trampoline-left`) and Win32 calls
/// (`syscall-enter`..`syscall-leave`) become slices on their thread's lane,
/// every other record an instant event with its named slots as arguments.
/// Without the `trace` feature, a trace with no events.
pub fn dump_chrome_trace() -> String {
    #[cfg(feature = "trace")]
    {
        imp::dump_chrome_trace()
    }
    #[cfg(not(feature = "trace"))]
    {
        String::from("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[]}\n")
    }
}

/// Forgets every record kept so far (and the dropped count). The clock keeps
/// running, so later rows stay comparable with earlier dumps.
pub fn clear() {
    #[cfg(feature = "trace")]
    imp::clear();
}

/// Installs, once per process, a vectored exception handler
/// (`AddVectoredExceptionHandler`, called first) that records every
/// first-chance exception as `exception raised code=.. address=..` and
/// declines to handle it (`EXCEPTION_CONTINUE_SEARCH`), so the exception is
/// dispatched exactly as if it were not there. Called automatically when the
/// trace is armed; starts the trace's clock. Does nothing without the
/// `trace` feature.
pub fn observe_exceptions() {
    #[cfg(feature = "trace")]
    imp::observe_exceptions();
}

/// Records `($target, $event, $a, $b)` when the `trace` feature is on and the
/// filter wants `$target`; with the feature off it compiles to nothing and
/// never evaluates `$a` or `$b`. The event must be listed in the event table
/// (checked at compile time).
macro_rules! trace_record {
    ($target:literal, $event:literal, $a:expr, $b:expr) => {{
        const _: () = assert!(
            $crate::trace::known($target, $event),
            concat!("trace event missing from the event table: ", $target, " ", $event)
        );
        #[cfg(feature = "trace")]
        {
            const MASK: u32 = $crate::trace::target_mask($target);
            if $crate::trace::imp::armed(MASK) {
                $crate::trace::imp::push($target, $event, ($a) as u64, ($b) as u64);
            }
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

/// The recorder: filter, ring, clock, exception observer and the two dump
/// formats. Only built with the `trace` feature.
#[cfg(feature = "trace")]
pub(crate) mod imp {
    use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
    use core::sync::atomic::{AtomicI64, AtomicPtr, AtomicU32, AtomicU64, fence};
    use std::collections::HashMap;
    use std::fmt::Write as _;
    use std::sync::{Once, OnceLock};

    use windows_sys::Win32::System::Diagnostics::Debug::{
        AddVectoredExceptionHandler, EXCEPTION_CONTINUE_SEARCH, EXCEPTION_POINTERS,
    };
    use windows_sys::Win32::System::Performance::{QueryPerformanceCounter, QueryPerformanceFrequency};
    use windows_sys::Win32::System::Threading::{GetCurrentProcessId, GetCurrentThreadId};

    use super::{EventInfo, OTHER_BIT, TARGETS, lookup, slot_is_hex, slot_is_signed, table_target, target_mask};

    /// The variable holding the filter.
    pub(crate) const FILTER_VAR: &str = "WINDOWS_THREADPOOL_TRACE";
    /// The variable that overrides the ring's capacity.
    pub(crate) const CAPACITY_VAR: &str = "WINDOWS_THREADPOOL_TRACE_CAPACITY";
    /// Records the ring holds unless [`CAPACITY_VAR`] says otherwise.
    pub(crate) const DEFAULT_CAPACITY: usize = 262_144;

    /// Set until the filter has been read; every target bit is set with it,
    /// so the first test of any target reaches the slow path.
    const UNINIT: u32 = 1 << 31;
    /// Every target bit, [`OTHER_BIT`] included.
    const EVERYTHING: u32 = (OTHER_BIT << 1) - 1;

    static MASK: AtomicU32 = AtomicU32::new(UNINIT | EVERYTHING);

    /// Whether records under `mask` (from [`target_mask`]) are kept. When the
    /// trace is disarmed this is one relaxed load and a test.
    #[inline(always)]
    pub(crate) fn armed(mask: u32) -> bool {
        let m = MASK.load(Relaxed);
        m & mask != 0 && (m & UNINIT == 0 || init() & mask != 0)
    }

    /// The filter word, reading the filter first if needed.
    pub(crate) fn mask() -> u32 {
        let m = MASK.load(Relaxed);
        if m & UNINIT == 0 { m } else { init() }
    }

    /// A parsed `WINDOWS_THREADPOOL_TRACE`.
    #[derive(Debug, PartialEq, Eq)]
    pub(crate) struct Filter {
        pub(crate) mask: u32,
        /// Names that are not targets; they arm nothing, and the dump says so.
        pub(crate) unknown: Vec<String>,
    }

    /// Parses a filter: comma-separated target names, surrounding spaces
    /// ignored; `*` arms everything, `syscall` both syscall targets.
    pub(crate) fn parse_filter(text: &str) -> Filter {
        let mut f = Filter { mask: 0, unknown: Vec::new() };
        for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match name {
                "*" => f.mask |= EVERYTHING,
                n if target_mask(n) != OTHER_BIT => f.mask |= target_mask(n),
                n => f.unknown.push(n.to_string()),
            }
        }
        f
    }

    /// The largest capacity accepted: 2^24 records, 1 GiB of ring.
    const MAX_CAPACITY: usize = 1 << 24;

    /// Parses a capacity: a count in `1..=MAX_CAPACITY`, rounded up to a
    /// power of two.
    pub(crate) fn parse_capacity(text: &str) -> Option<usize> {
        let n: usize = text.trim().parse().ok()?;
        if n == 0 || n > MAX_CAPACITY { None } else { Some(n.next_power_of_two()) }
    }

    struct State {
        filter_text: String,
        filter: Filter,
        /// The capacity variable's text when it was not a valid capacity.
        bad_capacity: Option<String>,
        ring: Option<Ring>,
    }

    static STATE: OnceLock<State> = OnceLock::new();

    fn state() -> &'static State {
        STATE.get_or_init(|| {
            let filter_text = std::env::var(FILTER_VAR).unwrap_or_default();
            let filter = parse_filter(&filter_text);
            let cap_text = std::env::var(CAPACITY_VAR).ok();
            let capacity = cap_text.as_deref().and_then(parse_capacity);
            let bad_capacity = cap_text.filter(|_| capacity.is_none());
            let ring = (filter.mask != 0).then(|| Ring::new(capacity.unwrap_or(DEFAULT_CAPACITY)));
            State { filter_text, filter, bad_capacity, ring }
        })
    }

    /// The slow path, taken until the mask is published: reads the filter
    /// once, publishes it, and installs the exception observer if armed.
    #[cold]
    #[inline(never)]
    fn init() -> u32 {
        let _last_error = KeepLastError::new();
        let mask = state().filter.mask;
        MASK.store(mask, Release);
        if mask != 0 {
            observe_exceptions();
        }
        mask
    }

    /// Restores the thread's last-error value when dropped: a record made
    /// between a failing Win32 call and the caller's `GetLastError` (the
    /// `syscall-leave` of `trace_call!`) must not change what it reads.
    struct KeepLastError(u32);

    impl KeepLastError {
        fn new() -> Self {
            // SAFETY: no preconditions.
            Self(unsafe { windows_sys::Win32::Foundation::GetLastError() })
        }
    }

    impl Drop for KeepLastError {
        fn drop(&mut self) {
            // SAFETY: no preconditions.
            unsafe { windows_sys::Win32::Foundation::SetLastError(self.0) }
        }
    }

    /// Records one event; the caller has checked the filter.
    pub(crate) fn push(target: &'static str, event: &'static str, a: u64, b: u64) {
        let _last_error = KeepLastError::new();
        let ticks = now();
        start_clock(ticks);
        // SAFETY: no preconditions.
        let tid = unsafe { GetCurrentThreadId() };
        if let Some(ring) = &state().ring {
            ring.push(ticks, tid, target, event, a, b);
        }
    }

    pub(crate) fn clear() {
        mask();
        if let Some(ring) = &state().ring {
            ring.clear();
        }
    }

    // ---- clock ----

    /// The earliest tick the trace has seen (`i64::MAX`: none yet).
    static START: AtomicI64 = AtomicI64::new(i64::MAX);

    pub(crate) fn now() -> i64 {
        let mut t = 0;
        // SAFETY: `t` is a valid out-pointer; the call cannot fail on XP or later.
        unsafe { QueryPerformanceCounter(&mut t) };
        t
    }

    fn frequency() -> i64 {
        let mut f = 0;
        // SAFETY: `f` is a valid out-pointer; the call cannot fail on XP or later.
        unsafe { QueryPerformanceFrequency(&mut f) };
        f.max(1)
    }

    /// Starts the clock at `ticks` unless it started earlier. After the first
    /// record this is one load and a branch not taken.
    fn start_clock(ticks: i64) {
        if ticks < START.load(Relaxed) {
            START.fetch_min(ticks, Relaxed);
        }
    }

    /// Converts ticks to nanoseconds since the trace's clock started.
    #[derive(Clone, Copy)]
    pub(crate) struct Clock {
        pub(crate) start: i64,
        pub(crate) frequency: i64,
    }

    impl Clock {
        fn current() -> Self {
            Self { start: START.load(Relaxed), frequency: frequency() }
        }

        pub(crate) fn ns(self, ticks: i64) -> u64 {
            let d = ticks.saturating_sub(self.start).max(0) as u128;
            (d * 1_000_000_000 / self.frequency as u128) as u64
        }
    }

    // ---- the ring ----

    /// One record's storage: a cache line. Every field is atomic so that a
    /// reader racing a writer performs no data race; the sequence word says
    /// whether what it read is one whole record.
    #[repr(C, align(64))]
    pub(crate) struct Slot {
        /// 0: never written; `2i + 1`: record `i` being written; `2i + 2`:
        /// record `i` complete.
        seq: AtomicU64,
        ticks: AtomicU64,
        a: AtomicU64,
        b: AtomicU64,
        target: AtomicPtr<u8>,
        event: AtomicPtr<u8>,
        target_len: AtomicU32,
        event_len: AtomicU32,
        tid: AtomicU32,
    }

    const _: () = assert!(size_of::<Slot>() == 64);

    impl Slot {
        fn fill(&self, ticks: i64, tid: u32, target: &'static str, event: &'static str, a: u64, b: u64) {
            let (tp, tl) = parts(target);
            let (ep, el) = parts(event);
            self.ticks.store(ticks as u64, Relaxed);
            self.a.store(a, Relaxed);
            self.b.store(b, Relaxed);
            self.target.store(tp, Relaxed);
            self.event.store(ep, Relaxed);
            self.target_len.store(tl, Relaxed);
            self.event_len.store(el, Relaxed);
            self.tid.store(tid, Relaxed);
        }
    }

    /// Keeps the hot counter off the line the other fields live on.
    #[repr(align(64))]
    struct Padded<T>(T);

    /// A record as a dump sees it.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) struct Record {
        pub(crate) index: u64,
        pub(crate) ticks: i64,
        pub(crate) tid: u32,
        pub(crate) target: &'static str,
        pub(crate) event: &'static str,
        pub(crate) a: u64,
        pub(crate) b: u64,
    }

    /// The records a dump reads, oldest first.
    #[derive(Debug)]
    pub(crate) struct Snapshot {
        pub(crate) records: Vec<Record>,
        /// Records overwritten since the last clear because the ring was full.
        pub(crate) dropped: u64,
        /// Records in the window not shown because they were still being
        /// written, or were abandoned by a writer lapped by the ring.
        pub(crate) incomplete: u64,
        pub(crate) capacity: u64,
    }

    /// A fixed-capacity ring of records, overwriting the oldest when full.
    pub(crate) struct Ring {
        head: Padded<AtomicU64>,
        /// Index of the first record since the last [`clear`](Ring::clear).
        tail: AtomicU64,
        mask: u64,
        slots: Box<[Slot]>,
    }

    /// A `&'static str` too long for the slot's 32-bit length is recorded as this.
    const TOO_LONG: &str = "<name too long>";

    fn parts(s: &'static str) -> (*mut u8, u32) {
        let s = if u32::try_from(s.len()).is_ok() { s } else { TOO_LONG };
        (s.as_ptr().cast_mut(), s.len() as u32)
    }

    impl Ring {
        /// A ring of `capacity` records; `capacity` must be a power of two.
        pub(crate) fn new(capacity: usize) -> Self {
            assert!(capacity.is_power_of_two(), "ring capacity {capacity} is not a power of two");
            // SAFETY: every field of `Slot` is an atomic integer or pointer,
            // for which all-zero bytes are a valid value.
            let slots = unsafe { Box::<[Slot]>::new_zeroed_slice(capacity).assume_init() };
            Self { head: Padded(AtomicU64::new(0)), tail: AtomicU64::new(0), mask: capacity as u64 - 1, slots }
        }

        pub(crate) fn capacity(&self) -> u64 {
            self.mask + 1
        }

        fn slot(&self, index: u64) -> &Slot {
            &self.slots[(index & self.mask) as usize]
        }

        /// Appends one record. Lock-free: never waits for another writer.
        pub(crate) fn push(&self, ticks: i64, tid: u32, target: &'static str, event: &'static str, a: u64, b: u64) {
            let index = self.head.0.fetch_add(1, Relaxed);
            if let Some(slot) = self.claim(index) {
                slot.fill(ticks, tid, target, event, a, b);
                slot.seq.store(2 * index + 2, Release);
            }
        }

        /// Takes record `index`'s slot for writing, or gives the record up
        /// (`None`): if the slot is still being written by a writer a lap (or
        /// more) behind, or a newer record already took it. A dump then counts
        /// the index as incomplete.
        fn claim(&self, index: u64) -> Option<&Slot> {
            let slot = self.slot(index);
            let writing = 2 * index + 1;
            let mut seq = slot.seq.load(Relaxed);
            loop {
                if seq & 1 == 1 || seq >= writing {
                    return None;
                }
                match slot.seq.compare_exchange_weak(seq, writing, Relaxed, Relaxed) {
                    Ok(_) => break,
                    Err(now) => seq = now,
                }
            }
            // Orders the claim before the field stores: a reader that sees a
            // new field also sees the odd sequence when it re-checks.
            fence(Release);
            Some(slot)
        }

        /// Reads record `index`: `Ok` if complete, `Err(true)` if a newer
        /// record replaced it, `Err(false)` if it is not (or never will be)
        /// complete.
        fn read(&self, index: u64) -> Result<Record, bool> {
            let slot = self.slot(index);
            let done = 2 * index + 2;
            let seq = slot.seq.load(Acquire);
            if seq != done {
                return Err(seq > done);
            }
            let ticks = slot.ticks.load(Relaxed) as i64;
            let (a, b) = (slot.a.load(Relaxed), slot.b.load(Relaxed));
            let (tp, ep) = (slot.target.load(Relaxed), slot.event.load(Relaxed));
            let (tl, el) = (slot.target_len.load(Relaxed), slot.event_len.load(Relaxed));
            let tid = slot.tid.load(Relaxed);
            fence(Acquire);
            if slot.seq.load(Relaxed) != done {
                return Err(true);
            }
            // SAFETY: the sequence was `done` before and after the loads, so
            // no writer touched the slot in between: pointer and length are
            // the parts of one `&'static str` stored by `push`.
            let (target, event) = unsafe {
                (
                    core::str::from_utf8_unchecked(core::slice::from_raw_parts(tp, tl as usize)),
                    core::str::from_utf8_unchecked(core::slice::from_raw_parts(ep, el as usize)),
                )
            };
            Ok(Record { index, ticks, tid, target, event, a, b })
        }

        /// The complete records still held, oldest first. Every index pushed
        /// since the last clear is either shown, dropped or incomplete.
        pub(crate) fn snapshot(&self) -> Snapshot {
            let head = self.head.0.load(Acquire);
            let tail = self.tail.load(Acquire).min(head);
            let first = tail.max(head.saturating_sub(self.capacity()));
            let (mut dropped, mut incomplete) = (first - tail, 0);
            let mut records = Vec::with_capacity((head - first) as usize);
            for index in first..head {
                match self.read(index) {
                    Ok(r) => records.push(r),
                    Err(true) => dropped += 1,
                    Err(false) => incomplete += 1,
                }
            }
            Snapshot { records, dropped, incomplete, capacity: self.capacity() }
        }

        /// Forgets every record pushed so far.
        pub(crate) fn clear(&self) {
            self.tail.store(self.head.0.load(Acquire), Release);
        }

        /// Starts a record and stops before filling it in, as a writer
        /// preempted mid-record would; [`Ring::resume`] finishes it.
        #[cfg(test)]
        pub(crate) fn stall(&self) -> (u64, &Slot) {
            let index = self.head.0.fetch_add(1, Relaxed);
            (index, self.claim(index).expect("the slot is free"))
        }

        /// Finishes a record started by [`Ring::stall`], in the two steps of
        /// `push`: `publish` false stops after filling in the fields.
        #[cfg(test)]
        pub(crate) fn resume(&self, index: u64, slot: &Slot, a: u64, publish: bool) {
            slot.fill(a as i64, 7, "work", "submitted", a, !a);
            if publish {
                slot.seq.store(2 * index + 2, Release);
            }
        }
    }

    // ---- exceptions ----

    static OBSERVER: Once = Once::new();

    pub(crate) fn observe_exceptions() {
        // Read the filter first, so the handler never takes the slow path.
        mask();
        OBSERVER.call_once(|| {
            start_clock(now());
            // SAFETY: `on_exception` has the handler signature and lives for
            // the whole process; the handler is never removed.
            unsafe { AddVectoredExceptionHandler(1, Some(on_exception)) };
        });
    }

    /// Records a first-chance exception and declines it. Runs on the
    /// faulting thread in the middle of exception dispatch: it takes no lock
    /// and allocates nothing.
    unsafe extern "system" fn on_exception(info: *mut EXCEPTION_POINTERS) -> i32 {
        // SAFETY: the dispatcher passes a valid `EXCEPTION_POINTERS` whose
        // record pointer is valid (or null) for the duration of the call.
        let record = unsafe { info.as_ref().and_then(|i| i.ExceptionRecord.as_ref()) };
        if let Some(r) = record {
            trace_record!("exception", "raised", r.ExceptionCode as u32, r.ExceptionAddress as usize);
        }
        EXCEPTION_CONTINUE_SEARCH
    }

    // ---- rendering ----

    /// The table entry of each `(target, event)` seen, looked up once.
    struct Names(HashMap<(&'static str, &'static str), Option<&'static EventInfo>>);

    impl Names {
        fn new() -> Self {
            Self(HashMap::new())
        }

        /// `(name, value)` of each slot to show: named slots, then unnamed
        /// ones that hold a value; an event outside the table shows `a` and `b`.
        fn slots(&mut self, r: &Record) -> [Option<(&'static str, u64)>; 2] {
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

    fn write_slot(out: &mut String, name: &str, v: u64) {
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
            let _ = write!(
                out,
                "{:>4}.{:09} {:>6} {} {}",
                ns / 1_000_000_000,
                ns % 1_000_000_000,
                r.tid,
                r.target,
                r.event
            );
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

    fn json_str(out: &mut String, s: &str) {
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
    fn json_us(out: &mut String, ns: u64) {
        let _ = write!(out, "{}.{:03}", ns / 1000, ns % 1000);
    }

    fn json_args(out: &mut String, slots: [Option<(&'static str, u64)>; 2], extra: Option<&str>) {
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
    struct Open {
        /// Trampolines pair by target and object, syscalls by name and `a`.
        syscall: bool,
        target: &'static str,
        event: &'static str,
        rec: Record,
    }

    impl Open {
        fn closes(&self, r: &Record, syscall: bool) -> bool {
            self.syscall == syscall
                && self.rec.a == r.a
                && if syscall { self.event == r.event } else { self.target == r.target }
        }
    }

    struct Chrome {
        out: String,
        clock: Clock,
        pid: u32,
        names: Names,
    }

    impl Chrome {
        fn head(&mut self, name: &str, cat: &str, ph: &str, tid: u32, ts: u64) {
            self.out.push_str(",\n{\"name\":");
            json_str(&mut self.out, name);
            self.out.push_str(",\"cat\":");
            json_str(&mut self.out, cat);
            let _ = write!(self.out, ",\"ph\":\"{ph}\",\"pid\":{},\"tid\":{tid},\"ts\":", self.pid);
            json_us(&mut self.out, ts);
        }

        fn slice(&mut self, open: &Open, end: &Record, extra: Option<&str>) {
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

        fn instant(&mut self, r: &Record) {
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
        let mut c =
            Chrome { out: String::with_capacity(256 + snap.records.len() * 160), clock, pid, names: Names::new() };
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

    #[cfg(test)]
    pub(crate) const EVERY_TARGET: u32 = EVERYTHING;
    const _: () = assert!(TARGETS.len() < 31, "the filter word holds a bit per target, OTHER_BIT and UNINIT");
}

// With the feature off, both macros are usable in a `const fn`, which can
// call nothing at run time: proof that they compile to nothing.
#[cfg(not(feature = "trace"))]
const _: () = {
    const fn probe(a: u64) -> u64 {
        trace_record!("work", "submitted", a, 0);
        trace_call!("SubmitThreadpoolWork", a, 0, { a + 1 })
    }
    assert!(probe(1) == 2);
};

#[cfg(test)]
mod tests;
