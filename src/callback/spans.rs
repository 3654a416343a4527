//! `tracing` spans around callbacks (feature `tracing`).
//!
//! Every trampoline runs the user's callback inside one span, named
//! `threadpool.callback`, target `windows_threadpool`, level `DEBUG`, with
//! the fields `kind` (`work`, `timer`, `periodic`, `wait`, `io`, `spawn`,
//! `task`), `object` (the pool object's address, hex, as the trace ring
//! prints it) and, for waits and I/O, `result` (`signalled` / `timed-out`,
//! or the completion's Win32 status). [`enter`] is the one function that
//! makes it; a trampoline holds what it returns for the callback's duration.
//!
//! # Parentage
//!
//! The span current when the callback was *caused* is the new span's
//! parent, so a request's span tree crosses the pool the way it crosses
//! `tokio::spawn` with `Instrument`. It is captured on the caller's thread:
//!
//! - per object, in a [`Parent`] kept in the context header, by the calls
//!   that cause callbacks: `Work::submit`, a timer's or a wait's `arm`.
//!   Each capture replaces the last one, so a callback's parent is the span
//!   of the latest submit or arm before it ran. That is exact for timers and
//!   waits (one arming, its firings), and for work submitted from one span;
//!   work submitted concurrently from several spans cannot be told apart by
//!   the pool (`TP_WORK` has no per-submission context), and each callback
//!   gets the parent of the latest submit. A re-arm from inside a callback
//!   (a timer's `rearm`, a wait's `WaitActivation::rearm`) keeps the parent:
//!   the next firing stays under the arming it continues rather than nesting
//!   under the previous firing, and `follows_from` that firing's span (where
//!   a parent does not fit). The slot keeps that span alive until the next
//!   re-arm, arm or the object's end.
//! - per operation, in a [`Captured`] kept in storage that belongs to one
//!   callback: an I/O operation's block (captured when it is issued), a
//!   spawned task (captured by `spawn`).
//!
//! A span with no span current at the cause is a root: a pool thread's own
//! current span (normally none) is never used. A submit or arm made with no
//! span current (or only one the subscriber disabled) clears the slot, so
//! an earlier capture never parents the callbacks of a later cause.
//!
//! # The submitter's span without the callback span
//!
//! The capture does not depend on the callback span being enabled: any
//! subscriber that recorded the span current at the cause gets it captured
//! (`Span::current()`, kept if it has an id, i.e. the subscriber did not
//! disable it). When the subscriber then does not want the crate's `DEBUG`
//! span (the usual `tracing_subscriber::fmt().init()`, at `INFO`), the
//! callback runs inside the captured span itself, entered on the pool
//! thread, as a future under tokio's `Instrument::in_current_span` runs in
//! its spawner's span: what the callback logs lands under the request
//! either way. Such a callback has no span of its own, so a re-arm records
//! no `follows_from` link.
//!
//! # A subscriber that panics
//!
//! Subscriber code runs when a span is created, entered, exited and closed.
//! In a task (`spawn`, `task`) that happens inside the task's unwind
//! boundary, so the subscriber's panic is the task's, handed to its joiner:
//! a closure task may run on a joiner's own thread (a scope's waiter), where
//! an unwind escaping past the scope's wait would leave siblings borrowing a
//! stack frame that is gone. In the callbacks of long-lived objects it
//! aborts the process, like a panic of the callback itself.
//!
//! # Cost
//!
//! Without the feature every type here is zero-sized and every function
//! empty and inlined: the call sites need no `cfg` and compile to nothing.
//! With it, a capture and an entry each first ask [`any_subscriber`]: with
//! no subscriber ever set, one relaxed load of tracing's "a dispatcher
//! exists" flag, and nothing else. Otherwise a capture asks for the current
//! span and, if the subscriber recorded one, clones it (a reference count)
//! into the slot (allocated at the object's first such capture, so an
//! object's header stays small without one), under the slot's own lock,
//! which no other lock is ever held with; an entry asks [`interested`]
//! (tracing's `span_enabled!` for the callback span's target and level) and
//! creates the callback span, or else enters the captured parent if there is
//! one. The old value is dropped after the lock is
//! released, so a subscriber's `try_close` never runs under it; only its
//! `clone_span` does (a callback about to run clones the slot's spans under
//! the lock, so a concurrent capture cannot close them first).

#[cfg(feature = "tracing")]
use std::mem::ManuallyDrop;
#[cfg(feature = "tracing")]
use std::sync::{Mutex, OnceLock, PoisonError};

/// What a callback span is for: its `kind` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) enum Kind {
    Work,
    Timer,
    Periodic,
    Wait,
    Io,
    /// A closure task: `spawn_blocking` (and its forms), or a task of a
    /// `scope`, `join` or `for_each`.
    Spawn,
    /// One poll of an async task (`task::spawn`).
    Task,
}

impl Kind {
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Kind::Work => "work",
            Kind::Timer => "timer",
            Kind::Periodic => "periodic",
            Kind::Wait => "wait",
            Kind::Io => "io",
            Kind::Spawn => "spawn",
            Kind::Task => "task",
        }
    }
}

/// A callback's outcome, for the span's `result` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) enum Outcome {
    /// A wait's handle was signalled: `result = "signalled"`.
    Signalled,
    /// A wait's timeout passed: `result = "timed-out"`.
    TimedOut,
    /// An I/O completion's Win32 status: `result = <status>` (0: success).
    Io(u32),
}

/// The target and level of the callback span (and of the interest check).
#[cfg(feature = "tracing")]
const TARGET: &str = "windows_threadpool";

/// Whether a subscriber could have recorded any span: with no dispatcher
/// ever set (global or scoped), one load. (With none set, tracing raises
/// the max level to TRACE once any callsite registers, so `span_enabled!`
/// alone would go on to ask the callsite's interest.)
#[cfg(feature = "tracing")]
#[inline]
fn any_subscriber() -> bool {
    tracing::dispatcher::has_been_set()
}

/// Whether a subscriber would record a callback span now. Cheap when the
/// answer is no (see the module docs).
#[cfg(feature = "tracing")]
#[inline]
fn interested() -> bool {
    any_subscriber() && tracing::span_enabled!(target: TARGET, tracing::Level::DEBUG)
}

/// A span captured for one callback to come: its parent, and the span of the
/// callback that re-armed it, which it follows from.
#[derive(Clone, Default)]
pub(crate) struct Captured {
    #[cfg(feature = "tracing")]
    span: Option<tracing::Span>,
    #[cfg(feature = "tracing")]
    follows: Option<tracing::Span>,
}

impl Captured {
    /// Nothing captured: the callback's span will be a root.
    pub(crate) const NONE: Self = Self {
        #[cfg(feature = "tracing")]
        span: None,
        #[cfg(feature = "tracing")]
        follows: None,
    };

    /// The current span, if a subscriber recorded it (whether or not it
    /// wants callback spans); otherwise nothing, for one load when no
    /// subscriber was ever set.
    #[inline]
    pub(crate) fn current() -> Self {
        #[cfg(feature = "tracing")]
        if any_subscriber() {
            let span = tracing::Span::current();
            if span.id().is_some() {
                return Self { span: Some(span), follows: None };
            }
        }
        Self::NONE
    }
}

impl core::fmt::Debug for Captured {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        #[cfg(feature = "tracing")]
        return f.debug_tuple("Captured").field(&self.span.as_ref().and_then(tracing::Span::id)).finish();
        #[cfg(not(feature = "tracing"))]
        f.write_str("Captured")
    }
}

/// An object's parent slot: the span current at its latest submit or arm,
/// and after a re-arm from a callback, that callback's span.
///
/// The slot is allocated at the first capture a subscriber is interested
/// in, so without one an object's header grows by one pointer and a lock
/// word, not by two spans: the header shares its cache line with the
/// callback it precedes.
#[derive(Default)]
pub(crate) struct Parent {
    #[cfg(feature = "tracing")]
    slot: OnceLock<Box<Mutex<Captured>>>,
}

impl Parent {
    pub(crate) const fn new() -> Self {
        Self {
            #[cfg(feature = "tracing")]
            slot: OnceLock::new(),
        }
    }

    /// The slot, allocated on first use.
    #[cfg(feature = "tracing")]
    fn slot(&self) -> std::sync::MutexGuard<'_, Captured> {
        self.slot.get_or_init(Box::default).lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the current span as the parent of the callbacks to come (and
    /// forgets any re-arming callback's). Allocates the slot only for a span
    /// a subscriber recorded.
    #[inline]
    pub(crate) fn capture(&self) {
        #[cfg(feature = "tracing")]
        {
            let new = Captured::current();
            let old = if new.span.is_some() {
                core::mem::replace(&mut *self.slot(), new)
            } else if let Some(slot) = self.slot.get() {
                // Nothing to capture now: an earlier capture must not parent
                // the callbacks of this submit or arm.
                core::mem::take(&mut *slot.lock().unwrap_or_else(PoisonError::into_inner))
            } else {
                return;
            };
            // Closing the old spans runs subscriber code: not under the lock.
            drop(old);
        }
    }

    /// A re-arm from inside a callback: the next callback keeps its parent
    /// and follows from the span current now (the re-arming callback's).
    #[inline]
    pub(crate) fn follow_current(&self) {
        #[cfg(feature = "tracing")]
        if interested() {
            let Captured { span: current, .. } = Captured::current();
            let old = core::mem::replace(&mut self.slot().follows, current);
            drop(old);
        }
    }

    /// [`follow_current`](Self::follow_current) with the span `entered`,
    /// for a re-arm applied after the callback that asked for it returned.
    #[inline]
    pub(crate) fn follow(&self, entered: &Entered) {
        #[cfg(feature = "tracing")]
        if let (true, Some(span)) = (entered.own, &*entered.span) {
            let span: tracing::Span = (**span).clone();
            let old = self.slot().follows.replace(span);
            drop(old);
        }
        #[cfg(not(feature = "tracing"))]
        let _ = entered;
    }

    /// A clone of what was captured, for a callback about to run.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) fn get(&self) -> Captured {
        #[cfg(feature = "tracing")]
        return match self.slot.get() {
            Some(slot) => slot.lock().unwrap_or_else(PoisonError::into_inner).clone(),
            None => Captured::NONE,
        };
        #[cfg(not(feature = "tracing"))]
        Captured::NONE
    }
}

/// The entered callback span; exits (and, if nothing else holds it,
/// closes) when dropped. Zero-sized without the feature.
#[must_use = "the span is exited when this is dropped"]
pub(crate) struct Entered {
    /// `None` when no subscriber was interested: nothing to exit. Dropped
    /// by hand so that the `None` check is inlined into the trampoline and
    /// the exit stays out of line.
    #[cfg(feature = "tracing")]
    span: ManuallyDrop<Option<tracing::span::EnteredSpan>>,
    /// Whether `span` is the crate's callback span, not the captured parent
    /// entered in its place.
    #[cfg(feature = "tracing")]
    own: bool,
}

#[cfg(feature = "tracing")]
impl Entered {
    const NONE: Self = Self { span: ManuallyDrop::new(None), own: false };
}

#[cfg(feature = "tracing")]
impl Drop for Entered {
    #[inline]
    fn drop(&mut self) {
        if let Some(span) = self.span.take() {
            exit(span);
        }
    }
}

/// Exits and releases a callback span, out of line like [`enter_interested`].
#[cfg(feature = "tracing")]
#[cold]
#[inline(never)]
fn exit(span: tracing::span::EnteredSpan) {
    drop(span);
}

/// Enters the `threadpool.callback` span for one callback of `kind` on
/// `object`, or, if the subscriber does not want that span, the captured
/// parent itself; hold the result while the callback runs. `parent` is
/// asked for the captured parent only when a subscriber was ever set: pass
/// `|| header.parent.get()` for a [`Parent`], or move a [`Captured`] in
/// (`move || captured`).
#[inline]
pub(crate) fn enter<P>(kind: Kind, object: usize, parent: P, outcome: Option<Outcome>) -> Entered
where
    P: FnOnce() -> Captured,
{
    #[cfg(feature = "tracing")]
    {
        if !any_subscriber() {
            return Entered::NONE;
        }
        if tracing::span_enabled!(target: TARGET, tracing::Level::DEBUG) {
            return enter_interested(kind, object, parent(), outcome);
        }
        let parent = parent();
        if parent.span.is_none() {
            return Entered::NONE;
        }
        enter_parent(parent)
    }
    #[cfg(not(feature = "tracing"))]
    {
        let _ = (kind, object, parent, outcome);
        Entered {}
    }
}

/// The span itself, out of line: a trampoline inlines only the interest
/// check, and the code that builds a span stays off its hot path (measured:
/// inlined, it cost the trampoline about 7 ns per callback under Wine even
/// when never run).
#[cfg(feature = "tracing")]
#[cold]
#[inline(never)]
fn enter_interested(kind: Kind, object: usize, parent: Captured, outcome: Option<Outcome>) -> Entered {
    let parent_id = parent.span.as_ref().and_then(tracing::Span::id);
    let wait_result = match outcome {
        Some(Outcome::Signalled) => Some("signalled"),
        Some(Outcome::TimedOut) => Some("timed-out"),
        _ => None,
    };
    let io_result = match outcome {
        Some(Outcome::Io(status)) => Some(status),
        _ => None,
    };
    let span = tracing::span!(
        target: TARGET,
        parent: parent_id,
        tracing::Level::DEBUG,
        "threadpool.callback",
        kind = kind.as_str(),
        object = format_args!("{object:#x}"),
        result = tracing::field::Empty,
    );
    if let Some(r) = wait_result {
        span.record("result", r);
    } else if let Some(r) = io_result {
        span.record("result", r);
    }
    if let Some(previous) = parent.follows.as_ref().and_then(tracing::Span::id) {
        span.follows_from(previous);
    }
    // The new span holds its own reference to the parent.
    drop(parent);
    Entered { span: ManuallyDrop::new(Some(span.entered())), own: true }
}

/// The captured parent entered in place of a callback span the subscriber
/// does not want; out of line like [`enter_interested`].
#[cfg(feature = "tracing")]
#[cold]
#[inline(never)]
fn enter_parent(parent: Captured) -> Entered {
    Entered { span: ManuallyDrop::new(parent.span.map(tracing::Span::entered)), own: false }
}

// An I/O operation block carries a `Captured` across threads.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Captured>();
};

// Without the feature everything here is zero-sized.
#[cfg(not(feature = "tracing"))]
const _: () = {
    assert!(size_of::<Captured>() == 0);
    assert!(size_of::<Parent>() == 0);
    assert!(size_of::<Entered>() == 0);
};
