//! Private thread pools (`TP_POOL`) and the process default pool.
//!
//! A private pool isolates a set of objects from the process default pool and
//! bounds their threads. Objects are put on it through a
//! [`CallbackEnviron`](crate::CallbackEnviron) that names it.
//!
//! Every object created on a private pool holds a reference to it, so the
//! pool is closed (`CloseThreadpool`) only when the [`Pool`] and all
//! of those objects are gone. Windows documents that closing a pool with live
//! objects defers the release, but Wine asserts when such an object is used
//! afterwards (see `docs/wine.md`); holding the reference is sound on both.

use std::io;
use std::sync::Arc;

use windows_sys::Win32::System::Threading::{
    CloseThreadpool, CreateThreadpool, PTP_POOL, QueryThreadpoolStackInformation, SetThreadpoolStackInformation,
    SetThreadpoolThreadMaximum, SetThreadpoolThreadMinimum, TP_POOL_STACK_INFORMATION,
};

use crate::sys;

/// The raw pool, closed when the last reference (the [`Pool`] or an
/// object created on it) goes away.
#[derive(Debug)]
pub(crate) struct PoolShared {
    raw: PTP_POOL,
}

// SAFETY: a `PTP_POOL` may be used and closed from any thread; the pool
// functions synchronise internally.
unsafe impl Send for PoolShared {}
// SAFETY: as above; shared access only calls thread-safe pool functions.
unsafe impl Sync for PoolShared {}

impl Drop for PoolShared {
    fn drop(&mut self) {
        // SAFETY: `self.raw` is live and closed exactly once, here, after every
        // object created on it has been closed (each held a reference).
        trace_call!("CloseThreadpool", self.raw, 0, { unsafe { CloseThreadpool(self.raw) } });
        trace_record!("pool", "closed", self.raw, 0);
    }
}

#[cfg(feature = "self-heal")]
impl PoolShared {
    pub(crate) fn raw(&self) -> PTP_POOL {
        self.raw
    }
}

/// A reference that keeps a private pool open; `None` is the default pool.
pub(crate) type PoolRef = Option<Arc<PoolShared>>;

/// An owned private thread pool (`CreateThreadpool`).
///
/// Dropping it releases this handle's reference; the pool is closed once no
/// object created on it is left.
#[derive(Debug)]
#[must_use = "dropping it releases the pool, which closes once no object uses it"]
pub struct Pool {
    shared: Arc<PoolShared>,
}

impl Pool {
    /// Creates a private pool (`CreateThreadpool`).
    pub fn new() -> io::Result<Self> {
        let raw = trace_call!("CreateThreadpool", 0, 0, {
            // SAFETY: the reserved argument must be null.
            sys::created(unsafe { CreateThreadpool(core::ptr::null()) })
        })?;
        trace_record!("pool", "created", raw, 0);
        Ok(Self { shared: Arc::new(PoolShared { raw }) })
    }

    /// Sets the most threads the pool will create (`SetThreadpoolThreadMaximum`).
    ///
    /// A maximum below the minimum is the platform's to resolve.
    ///
    /// # Errors
    /// [`io::ErrorKind::InvalidInput`] for zero: a pool that may have no
    /// thread can never run a callback.
    pub fn set_max_threads(&self, threads: u32) -> io::Result<()> {
        if threads == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "set_max_threads(0): a pool with at most zero threads could never run a callback",
            ));
        }
        trace_call!("SetThreadpoolThreadMaximum", self.as_raw(), threads, {
            // SAFETY: `self.as_raw()` is a live pool: `self` holds a reference.
            unsafe { SetThreadpoolThreadMaximum(self.as_raw(), threads) }
        });
        Ok(())
    }

    /// Sets the fewest threads the pool keeps available
    /// (`SetThreadpoolThreadMinimum`), creating them now; fails with the OS
    /// error if they cannot be created.
    pub fn set_min_threads(&self, threads: u32) -> io::Result<()> {
        trace_call!("SetThreadpoolThreadMinimum", self.as_raw(), threads, {
            // SAFETY: `self.as_raw()` is a live pool: `self` holds a reference.
            sys::check(unsafe { SetThreadpoolThreadMinimum(self.as_raw(), threads) })
        })
    }

    /// Sets the stack size of the threads the pool creates from now on
    /// (`SetThreadpoolStackInformation`): `reserve` bytes of address space,
    /// `commit` of them committed up front. Threads already created keep
    /// their stacks.
    ///
    /// Wine 8 stores the sizes ([`stack_size`](Self::stack_size) reads them
    /// back) but creates its threads with the default stack (`docs/wine.md`).
    ///
    /// # Errors
    /// [`io::ErrorKind::InvalidInput`] if `commit` is above `reserve`;
    /// otherwise the OS error if `SetThreadpoolStackInformation` fails.
    pub fn set_stack_size(&self, reserve: usize, commit: usize) -> io::Result<()> {
        if commit > reserve {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("set_stack_size: commit ({commit} bytes) exceeds reserve ({reserve} bytes)"),
            ));
        }
        let info = TP_POOL_STACK_INFORMATION { StackReserve: reserve, StackCommit: commit };
        let ok = trace_call!("SetThreadpoolStackInformation", self.as_raw(), reserve, {
            // SAFETY: `self.as_raw()` is a live pool: `self` holds a
            // reference; `info` outlives the call.
            unsafe { SetThreadpoolStackInformation(self.as_raw(), &info) }
        });
        if ok == 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
    }

    /// The stack size the pool creates threads with, as `(reserve, commit)`
    /// in bytes (`QueryThreadpoolStackInformation`).
    pub fn stack_size(&self) -> io::Result<(usize, usize)> {
        let mut info = TP_POOL_STACK_INFORMATION { StackReserve: 0, StackCommit: 0 };
        let ok = trace_call!("QueryThreadpoolStackInformation", self.as_raw(), 0, {
            // SAFETY: `self.as_raw()` is a live pool: `self` holds a
            // reference; `info` is writable for the call.
            unsafe { QueryThreadpoolStackInformation(self.as_raw(), &mut info) }
        });
        if ok == 0 { Err(io::Error::last_os_error()) } else { Ok((info.StackReserve, info.StackCommit)) }
    }

    /// The raw `PTP_POOL`, valid while `self` is alive.
    pub fn as_raw(&self) -> PTP_POOL {
        self.shared.raw
    }

    pub(crate) fn share(&self) -> Arc<PoolShared> {
        Arc::clone(&self.shared)
    }
}
