//! The callback environment an object is created in (`TP_CALLBACK_ENVIRON_V3`).
//!
//! The SDK initialises and edits this structure with inline header functions
//! (`InitializeThreadpoolEnvironment`, `SetThreadpoolCallbackPool`, ...) that
//! `windows-sys` cannot emit; [`CallbackEnviron`] provides them as builder
//! methods.
//! An environment is only read when an object is created: changing it later
//! does not affect objects already created from it.
//!
//! ```
//! use windows_threadpool::{CallbackEnviron, CallbackPriority, Pool, Work};
//!
//! let pool = Pool::new()?;
//! let env = CallbackEnviron::new().with_pool(&pool).with_priority(CallbackPriority::High);
//! let work = Work::new_in(|_| println!("on the private pool"), &env)?;
//! work.submit();
//! work.wait();
//! # Ok::<(), std::io::Error>(())
//! ```

use core::ffi::c_void;

use windows_sys::Win32::System::Threading::{
    PTP_CLEANUP_GROUP, PTP_CLEANUP_GROUP_CANCEL_CALLBACK, TP_CALLBACK_ENVIRON_V3, TP_CALLBACK_PRIORITY,
};

use crate::placement::{Placement, ProcessorSet};
use crate::pool::{Pool, PoolRef};

/// `TP_CALLBACK_ENVIRON_V3::Version` for the V3 layout.
const ENVIRON_VERSION_3: u32 = 3;
/// `TP_CALLBACK_PRIORITY_HIGH`.
const PRIORITY_HIGH: TP_CALLBACK_PRIORITY = 0;
/// `TP_CALLBACK_PRIORITY_NORMAL`.
const PRIORITY_NORMAL: TP_CALLBACK_PRIORITY = 1;
/// `TP_CALLBACK_PRIORITY_LOW`.
const PRIORITY_LOW: TP_CALLBACK_PRIORITY = 2;
/// Bit 0 of `u.Flags`: `LongFunction`, set by `SetThreadpoolCallbackRunsLong`.
const FLAG_LONG_FUNCTION: u32 = 1;

/// The priority of callbacks created in an environment
/// (`SetThreadpoolCallbackPriority`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum CallbackPriority {
    /// `TP_CALLBACK_PRIORITY_HIGH`.
    High,
    /// `TP_CALLBACK_PRIORITY_NORMAL`, the default.
    #[default]
    Normal,
    /// `TP_CALLBACK_PRIORITY_LOW`.
    Low,
}

impl CallbackPriority {
    fn raw(self) -> TP_CALLBACK_PRIORITY {
        match self {
            Self::High => PRIORITY_HIGH,
            Self::Normal => PRIORITY_NORMAL,
            Self::Low => PRIORITY_LOW,
        }
    }

    fn from_raw(raw: TP_CALLBACK_PRIORITY) -> Self {
        match raw {
            PRIORITY_HIGH => Self::High,
            PRIORITY_LOW => Self::Low,
            _ => Self::Normal,
        }
    }
}

/// A `TP_CALLBACK_ENVIRON_V3`, initialised as `InitializeThreadpoolEnvironment`
/// does, built in one expression and passed by shared reference:
///
/// ```
/// # use windows_threadpool::{CallbackEnviron, CallbackPriority, Pool};
/// # let pool = Pool::new()?;
/// let env = CallbackEnviron::new().with_pool(&pool).with_priority(CallbackPriority::Low);
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// An environment that names a private pool holds a reference to it, as
/// every object created on the pool does, so the two can live in one struct
/// and the pool stays open for as long as either needs it.
///
/// A clone copies every setting, raw ones included (the library of
/// [`with_library`](Self::with_library), the group of
/// [`with_cleanup_group`](Self::with_cleanup_group)): the `# Safety`
/// contracts of those methods bind every object created from the
/// environment *or from any clone made of it* after the call, for as long as
/// such a clone exists.
#[derive(Clone)]
pub struct CallbackEnviron {
    inner: TP_CALLBACK_ENVIRON_V3,
    /// Keeps the named pool open for the objects created from this environment.
    pool: PoolRef,
    /// Where the callbacks of objects created from it run (not part of the
    /// OS structure: applied by the trampolines, see `crate::placement`).
    affinity: Placement,
}

// SAFETY: the structure is plain data read by the OS only while an object is
// being created; the raw pointers it holds (pool, cleanup group, DLL) are
// handles valid on any thread.
unsafe impl Send for CallbackEnviron {}
// SAFETY: shared references only allow reading the plain data (see `Send`).
unsafe impl Sync for CallbackEnviron {}

impl Default for CallbackEnviron {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for CallbackEnviron {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let e = &self.inner;
        f.debug_struct("CallbackEnviron")
            .field("pool", &(e.Pool as *const c_void))
            .field("cleanup_group", &(e.CleanupGroup as *const c_void))
            .field("priority", &e.CallbackPriority)
            .field("runs_long", &self.runs_long())
            .field("affinity", &self.affinity.set())
            .finish_non_exhaustive()
    }
}

impl CallbackEnviron {
    /// An environment for the process default pool: version 3, normal
    /// priority, `Size` set, everything else zero.
    pub fn new() -> Self {
        let inner = TP_CALLBACK_ENVIRON_V3 {
            Version: ENVIRON_VERSION_3,
            CallbackPriority: PRIORITY_NORMAL,
            Size: size_of::<TP_CALLBACK_ENVIRON_V3>() as u32,
            ..Default::default()
        };
        Self { inner, pool: None, affinity: Placement::NONE }
    }

    /// Objects created from this environment run on `pool`
    /// (`SetThreadpoolCallbackPool`); the environment keeps the pool open.
    #[must_use]
    pub fn with_pool(mut self, pool: &Pool) -> Self {
        self.inner.Pool = pool.as_raw();
        self.pool = Some(pool.share());
        self
    }

    /// `SetThreadpoolCallbackPriority`.
    #[must_use]
    pub fn with_priority(mut self, priority: CallbackPriority) -> Self {
        self.inner.CallbackPriority = priority.raw();
        self
    }

    /// Tells the pool that callbacks may run long, so it should not wait for
    /// them before creating threads (`SetThreadpoolCallbackRunsLong`).
    #[must_use]
    pub fn with_runs_long(mut self) -> Self {
        // SAFETY: `u` is a union of a `u32` and a bit-field struct of the same
        // size; every bit pattern is a valid `u32`.
        unsafe { self.inner.u.Flags |= FLAG_LONG_FUNCTION };
        self
    }

    /// Runs every callback of the objects created from this environment on
    /// the processors of `set`: the pool thread is moved there for the
    /// callback and its previous affinity restored afterwards. This places
    /// callbacks, not the pool's threads; see [`crate::placement`].
    #[must_use]
    pub fn with_affinity(mut self, set: ProcessorSet) -> Self {
        self.affinity = Placement::of(Some(set));
        self
    }

    /// The priority set by [`with_priority`](Self::with_priority).
    pub fn priority(&self) -> CallbackPriority {
        CallbackPriority::from_raw(self.inner.CallbackPriority)
    }

    /// Whether [`with_runs_long`](Self::with_runs_long) was called.
    pub fn runs_long(&self) -> bool {
        // SAFETY: see `with_runs_long`.
        unsafe { self.inner.u.Flags & FLAG_LONG_FUNCTION != 0 }
    }

    /// The processors set by [`with_affinity`](Self::with_affinity), if any.
    pub fn affinity(&self) -> Option<ProcessorSet> {
        self.affinity.set()
    }

    /// Keeps the DLL `module` loaded while callbacks created from this
    /// environment run (`SetThreadpoolCallbackLibrary`).
    ///
    /// # Safety
    /// `module` must be a module handle (`HMODULE`) of a DLL that stays loaded
    /// until every object created from this environment, or from any clone
    /// of it (clones, and clones of clones, carry the module), has been
    /// created (the pool takes its own reference for the callbacks).
    /// Dropping the environment does not end the obligation while such a
    /// clone lives.
    #[must_use]
    pub unsafe fn with_library(mut self, module: *mut c_void) -> Self {
        self.inner.RaceDll = module;
        self
    }

    /// Makes objects created from this environment members of a raw cleanup
    /// group (`SetThreadpoolCallbackCleanupGroup`).
    ///
    /// This is a raw seam: the safe cleanup group in
    /// [`crate::cleanup_group`] is the way to use cleanup groups without it.
    ///
    /// # Safety
    /// The environment's clones (and their clones) carry `group` and
    /// `cancel`; each condition below covers the objects created from any of
    /// them as well as from this environment.
    /// `group` must be a live cleanup group for as long as objects are created
    /// from this environment or such a clone, and must stay open (no
    /// `CloseThreadpoolCleanupGroup`) until every object created from any of
    /// them has been closed (the objects' owners close them on drop); whoever
    /// releases the
    /// group's members (`CloseThreadpoolCleanupGroupMembers`) must not do so
    /// while an owned object of this crate created from any of them is alive:
    /// the release closes the object under its owner. An object dropped from
    /// its own callback stays alive until its teardown, which is handed to
    /// another thread, has finished, and nothing tells the caller when that
    /// is: do not drop such an object from its own callback unless the
    /// group's members are never released this way. `cancel`, if given,
    /// must be safe to call with the context of any such object.
    #[must_use]
    pub unsafe fn with_cleanup_group(
        mut self,
        group: PTP_CLEANUP_GROUP,
        cancel: PTP_CLEANUP_GROUP_CANCEL_CALLBACK,
    ) -> Self {
        self.inner.CleanupGroup = group;
        self.inner.CleanupGroupCancelCallback = cancel;
        self
    }

    /// The environment as the `Create*` functions take it, valid while
    /// `self` is. Objects created through this pointer by other code do not
    /// keep the pool open: once this environment, its clones and the
    /// [`Pool`] are dropped, the pool is closed (`CloseThreadpool`) even if
    /// such objects are alive.
    pub fn as_ptr(&self) -> *const TP_CALLBACK_ENVIRON_V3 {
        &self.inner
    }

    /// The raw structure, for inspection.
    pub fn as_inner(&self) -> &TP_CALLBACK_ENVIRON_V3 {
        &self.inner
    }

    /// An environment for the pool `pool` keeps open (the default pool when
    /// `None`), for objects the crate creates on its own behalf.
    #[cfg(feature = "self-heal")]
    pub(crate) fn for_pool_ref(pool: PoolRef) -> Self {
        let mut e = Self::new();
        if let Some(p) = &pool {
            e.inner.Pool = p.raw();
        }
        e.pool = pool;
        e
    }

    /// The reference that keeps this environment's pool open.
    pub(crate) fn pool_ref(&self) -> &PoolRef {
        &self.pool
    }
}

/// What a `Create*` call needs from an optional environment: the pointer it
/// takes, a reference that keeps the environment's pool open for as long
/// as the object created from it lives, and the placement its context keeps.
pub(crate) fn env_parts(env: Option<&CallbackEnviron>) -> (*const TP_CALLBACK_ENVIRON_V3, PoolRef, Placement) {
    match env {
        Some(e) => (e.as_ptr(), e.pool.clone(), e.affinity),
        None => (core::ptr::null(), None, Placement::NONE),
    }
}
