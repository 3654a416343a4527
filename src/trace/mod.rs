//! An allocation-free in-process record of what the crate does.
//!
//! Build with the `trace` feature and set `WINDOWS_THREADPOOL_TRACE` to a
//! comma-separated list of targets (`*` for all of them); [`dump`] then
//! returns one row per record and [`dump_chrome_trace`] a timeline for
//! Perfetto. `docs/trace.md` is the user's guide and lists every event.
//!
//! ```
//! use windows_threadpool::{trace, Work};
//!
//! let work = Work::new(|_| {})?;
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
//! table** ([`events()`]), the one list of every event with the names of its
//! two payload slots. It lives under `events/`, one file per family, so the
//! trace depends on none of the modules that record into it. The table is what [`dump`]
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
//! older than its own index to `2 * index + 1` (an acquire, so the older
//! record's stores come before its own), stores the fields, then
//! publishes `2 * index + 2`. A reader accepts slot contents only if the
//! sequence equals `2 * index + 2` before and after reading the fields, so a
//! dump running concurrently with writers never shows a torn record. A writer
//! never waits: if the slot is mid-write by a writer a whole lap behind
//! (preempted while `capacity` records were made), it abandons its record,
//! and a dump counts that index as incomplete rather than show a mixture.
//! No lock, no allocation, no formatting on the record path; the fields are
//! atomics so that a racing read is not a data race.
//! The ring needs nothing from Windows and also builds on the host, where
//! loom checks this protocol under every interleaving of two writers and a
//! reader (`imp/ring.rs`).
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
//! **Adding an event**: list it in its family's file under `events/` (a new
//! family also goes into `table::TABLES`, which its recording sites do not
//! compile without, and its file into the source scan in `trace/tests.rs`, which a
//! test checks against the module tree), record it with `trace_record!`,
//! and run `cargo xtask trace-doc` to regenerate the reference in
//! `docs/trace.md`. A new target needs nothing more: [`TARGETS`] is derived
//! from the table at compile time.
//! A slot that holds an address or a code prints in hex if its name is in
//! [`HEX_SLOTS`].

mod events;
mod table;

pub use events::EventInfo;

pub(crate) use table::*;
pub use table::{HEX_SLOTS, SIGNED_SLOTS, TARGETS, events};

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
pub(crate) mod imp;

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
