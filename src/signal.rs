//! Console control events as futures: [`ctrl_c`], [`ctrl_break`],
//! [`ctrl_close`], [`ctrl_logoff`], [`ctrl_shutdown`].
//!
//! ```no_run
//! use windows_threadpool::{signal, task};
//!
//! task::block_on(async {
//!     signal::ctrl_c().await?; // from the call on, Ctrl+C no longer ends the process
//!     println!("stopping");
//!     Ok::<(), std::io::Error>(())
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # One handler, many listeners
//! The first call of any of these registers one handler for the process
//! (`SetConsoleCtrlHandler`), which stays. Each call makes a listener: a
//! future that resolves at the next event of its kind after the call,
//! whatever the executor; any number may wait at once, and each event
//! wakes every one of them. From the first call for a kind on, the handler
//! reports that kind handled, so its default action (for Ctrl+C and
//! Ctrl+Break, ending the process) no longer runs; a kind never listened
//! for keeps its default.
//!
//! # Close, logoff and shutdown end the process
//! For `CTRL_CLOSE_EVENT` (the console window closed), `CTRL_LOGOFF_EVENT`
//! and `CTRL_SHUTDOWN_EVENT`, Windows ends the process once the handler
//! returns, or once its own limit has passed (5 s by default for close,
//! and, for logoff and shutdown, the time the system gives applications,
//! 5 s by default). So the handler, which runs on a thread the system
//! creates for it, does not return while the program is still at its
//! shutdown: each listener that was waiting resolves to a
//! [`Signalled`], and the handler returns once every such `Signalled` has
//! been dropped (and every such listener that was dropped unresolved).
//! Keep the `Signalled` until the work is flushed:
//!
//! ```no_run
//! use windows_threadpool::{signal, task};
//!
//! task::block_on(async {
//!     let closing = signal::ctrl_close().await?;
//!     // ... flush logs, finish the request in flight ...
//!     drop(closing); // now the system may end the process
//!     Ok::<(), std::io::Error>(())
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! For Ctrl+C and Ctrl+Break the handler returns at once: the process goes
//! on, and a `Signalled` holds nothing back. A service receives
//! `CTRL_SHUTDOWN_EVENT` and `CTRL_LOGOFF_EVENT` as well, without being
//! ended by them: the service control manager's stop is what tells it to
//! stop.
//!
//! Under Wine, a process started without a console of its own receives no
//! event (`GenerateConsoleCtrlEvent` fails with `ERROR_INVALID_ACCESS`),
//! and `GenerateConsoleCtrlEvent` delivers `CTRL_C_EVENT` but refuses
//! `CTRL_BREAK_EVENT` (see `docs/wine.md`).

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use std::io;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

use windows_sys::Win32::System::Console::{
    CTRL_BREAK_EVENT, CTRL_C_EVENT, CTRL_CLOSE_EVENT, CTRL_LOGOFF_EVENT, CTRL_SHUTDOWN_EVENT, SetConsoleCtrlHandler,
};
use windows_sys::core::BOOL;

/// A console control event (`CTRL_*_EVENT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CtrlEvent {
    /// Ctrl+C (`CTRL_C_EVENT`).
    C,
    /// Ctrl+Break (`CTRL_BREAK_EVENT`).
    Break,
    /// The console window was closed (`CTRL_CLOSE_EVENT`).
    Close,
    /// A user is logging off (`CTRL_LOGOFF_EVENT`; services only).
    Logoff,
    /// The system is shutting down (`CTRL_SHUTDOWN_EVENT`; services only).
    Shutdown,
}

const KINDS: [CtrlEvent; 5] =
    [CtrlEvent::C, CtrlEvent::Break, CtrlEvent::Close, CtrlEvent::Logoff, CtrlEvent::Shutdown];

impl CtrlEvent {
    /// The event's `CTRL_*_EVENT` value.
    pub const fn code(self) -> u32 {
        match self {
            Self::C => CTRL_C_EVENT,
            Self::Break => CTRL_BREAK_EVENT,
            Self::Close => CTRL_CLOSE_EVENT,
            Self::Logoff => CTRL_LOGOFF_EVENT,
            Self::Shutdown => CTRL_SHUTDOWN_EVENT,
        }
    }

    fn from_code(code: u32) -> Option<Self> {
        KINDS.into_iter().find(|k| k.code() == code)
    }

    /// Whether the system ends the process once the handler returns.
    pub const fn ends_the_process(self) -> bool {
        matches!(self, Self::Close | Self::Logoff | Self::Shutdown)
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The next Ctrl+C (see the [module docs](self)).
pub fn ctrl_c() -> Listener {
    Listener::new(CtrlEvent::C)
}

/// The next Ctrl+Break.
pub fn ctrl_break() -> Listener {
    Listener::new(CtrlEvent::Break)
}

/// The next close of the console window; keep the [`Signalled`] until the
/// program is ready to be ended.
pub fn ctrl_close() -> Listener {
    Listener::new(CtrlEvent::Close)
}

/// The next logoff (received by services); keep the [`Signalled`] as for
/// [`ctrl_close`].
pub fn ctrl_logoff() -> Listener {
    Listener::new(CtrlEvent::Logoff)
}

/// The next shutdown of the system (received by services); keep the
/// [`Signalled`] as for [`ctrl_close`].
pub fn ctrl_shutdown() -> Listener {
    Listener::new(CtrlEvent::Shutdown)
}

/// One kind's listeners and deliveries.
#[derive(Default)]
struct Kind {
    /// Whether a listener of this kind was ever made: the handler reports
    /// the kind handled from then on.
    listened: bool,
    /// Events delivered so far.
    delivered: u64,
    /// Listeners alive, and the wakers of those that were polled.
    alive: usize,
    wakers: Vec<(u64, Waker)>,
    next_id: u64,
    /// What deliveries still wait for: each delivery counts every listener
    /// alive then once; a listener alive across `d` deliveries gives back
    /// `d` as it leaves (one of them through its `Signalled`, if it
    /// resolved).
    held: usize,
}

struct Registry {
    kinds: Mutex<[Kind; 5]>,
    /// Notified whenever `held` falls.
    released: Condvar,
}

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| Registry { kinds: Mutex::new(Default::default()), released: Condvar::new() })
}

fn lock() -> MutexGuard<'static, [Kind; 5]> {
    registry().kinds.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Registers the handler once per process; the outcome of that one try.
fn install() -> io::Result<()> {
    static INSTALLED: OnceLock<Result<(), i32>> = OnceLock::new();
    let outcome = INSTALLED.get_or_init(|| {
        // SAFETY: `handler` is a plain function of the right signature that
        // stays for the life of the process.
        crate::sys::check(unsafe { SetConsoleCtrlHandler(Some(handler), 1) }).map_err(|e| e.raw_os_error().unwrap_or(0))
    });
    outcome.map_err(io::Error::from_raw_os_error)
}

/// The handler the system calls, on a thread of its own, for each event.
unsafe extern "system" fn handler(code: u32) -> BOOL {
    crate::callback::unwind::or_abort("the console control handler", || BOOL::from(deliver(code)))
}

/// Delivers the event `code` to its listeners; whether it is handled.
fn deliver(code: u32) -> bool {
    let Some(kind) = CtrlEvent::from_code(code) else { return false };
    let wakers = {
        let mut kinds = lock();
        let k = &mut kinds[kind.index()];
        if !k.listened {
            return false; // the default action
        }
        k.delivered += 1;
        k.held += k.alive;
        core::mem::take(&mut k.wakers)
    };
    // Woken with the lock released: a waker may run any code, dropping a
    // `Listener` or a `Signalled` (which lock) among it.
    for (_, waker) in wakers {
        waker.wake();
    }
    if kind.ends_the_process() {
        let released = &registry().released;
        let held = |kinds: &mut [Kind; 5]| kinds[kind.index()].held > 0;
        drop(released.wait_while(lock(), held).unwrap_or_else(PoisonError::into_inner));
    }
    true
}

/// Delivers `event` as the system would, from a thread of its own, and
/// returns what the handler returned. A test hook, not API: Wine
/// generates only `CTRL_C_EVENT`, and no program can generate close,
/// logoff or shutdown.
#[cfg(any(test, feature = "test-hooks"))]
#[doc(hidden)]
pub fn deliver_as_the_system(event: CtrlEvent) -> bool {
    std::thread::spawn(move || deliver(event.code())).join().expect("the handler does not unwind")
}

/// How many events of `event`'s kind have been delivered to listeners (a
/// kind no one listened for counts none). A test hook, not API.
#[cfg(any(test, feature = "test-hooks"))]
#[doc(hidden)]
pub fn delivered(event: CtrlEvent) -> u64 {
    lock()[event.index()].delivered
}

/// A listener for the next event of its kind, made by [`ctrl_c`] and its
/// siblings: a future resolving to a [`Signalled`], or to the error of the
/// handler's registration.
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Listener {
    kind: CtrlEvent,
    /// Events delivered when it was made; `None` once resolved.
    seen: Option<u64>,
    id: u64,
    error: Option<io::Error>,
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Listener>();
    send_sync::<Signalled>();
};

impl Listener {
    fn new(kind: CtrlEvent) -> Self {
        if let Err(e) = install() {
            return Self { kind, seen: None, id: 0, error: Some(e) };
        }
        let mut kinds = lock();
        let k = &mut kinds[kind.index()];
        k.listened = true;
        k.alive += 1;
        k.next_id += 1;
        Self { kind, seen: Some(k.delivered), id: k.next_id, error: None }
    }

    /// Leaves the kind's listeners: resolved (`to_guard`: one count moves
    /// to the `Signalled`) or dropped. Returns its waker, to be dropped by
    /// the caller once the lock is released (dropping a waker may run any
    /// code, a `Listener`'s drop among it).
    fn leave(&mut self, kinds: &mut [Kind; 5], to_guard: bool) -> Option<Waker> {
        let seen = self.seen.take()?;
        let k = &mut kinds[self.kind.index()];
        k.alive -= 1;
        let waker = k.wakers.iter().position(|(id, _)| *id == self.id).map(|i| k.wakers.swap_remove(i).1);
        let counted = (k.delivered - seen) as usize;
        let release = counted - usize::from(to_guard && counted > 0);
        if release > 0 {
            k.held -= release;
            registry().released.notify_all();
        }
        waker
    }
}

impl Future for Listener {
    type Output = io::Result<Signalled>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(e) = self.error.take() {
            return Poll::Ready(Err(e));
        }
        let Some(seen) = self.seen else { panic!("a console control listener polled after it resolved") };
        let mut kinds = lock();
        if kinds[self.kind.index()].delivered > seen {
            let old = self.leave(&mut kinds, true);
            drop(kinds);
            drop(old);
            return Poll::Ready(Ok(Signalled { kind: self.kind }));
        }
        let wakers = &mut kinds[self.kind.index()].wakers;
        let old = match wakers.iter_mut().find(|(id, _)| *id == self.id) {
            Some((_, w)) => Some(core::mem::replace(w, cx.waker().clone())),
            None => {
                wakers.push((self.id, cx.waker().clone()));
                None
            }
        };
        drop(kinds);
        drop(old); // with the lock released, as in `leave`
        Poll::Pending
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if self.seen.is_some() {
            let old = self.leave(&mut lock(), false);
            drop(old);
        }
    }
}

/// An event was delivered. For close, logoff and shutdown the handler (and
/// so the process) waits until this is dropped (see [the module
/// docs](self#close-logoff-and-shutdown-end-the-process)); one forgotten
/// (`mem::forget`) holds the handler until the system's own limit. Not
/// `must_use`: for Ctrl+C and Ctrl+Break it holds nothing, and
/// `signal::ctrl_c().await?;` discards it.
#[derive(Debug)]
pub struct Signalled {
    kind: CtrlEvent,
}

impl Signalled {
    /// Which event it was.
    pub fn event(&self) -> CtrlEvent {
        self.kind
    }
}

impl Drop for Signalled {
    fn drop(&mut self) {
        lock()[self.kind.index()].held -= 1;
        registry().released.notify_all();
    }
}
