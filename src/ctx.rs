//! The heap context handed to the OS with each pool object.
//!
//! A pool object's callback receives one `*mut c_void` context. [`Context`]
//! owns that allocation: a [`Shared`] made of a non-generic header `H` (state
//! both the owner and the trampoline use, such as the drain obligation) and
//! the user's callback `F`, after the object's [`Placement`]. `F` is erased
//! so the public object types are not generic over the callback; the
//! trampoline, which is generic, casts the pointer back with [`get`].
//! `Shared` is `repr(C)` with the placement first and the header second, so
//! the per-callback scope reads the placement knowing neither `H` nor `F`,
//! and the owner reaches the header without knowing `F`.
//!
//! The owner frees the context only after the object has been drained and
//! closed, which is what makes a callback unable to outlive the state it
//! captured.

use core::ffi::c_void;
use core::marker::PhantomData;
use core::ptr::NonNull;

use crate::placement::Placement;

/// What a context points to.
#[repr(C)]
pub(crate) struct Shared<H, F> {
    /// First: read by `placement::enter` through the bare context pointer.
    placement: Placement,
    pub(crate) header: H,
    pub(crate) callback: F,
}

pub(crate) struct Context<H> {
    ptr: NonNull<c_void>,
    free: unsafe fn(NonNull<c_void>),
    _header: PhantomData<H>,
}

// SAFETY: `Context::new` only accepts `H` and `F` that are `Send + Sync`, and
// the allocation is only reached through shared references (owner and
// callbacks) or by the owner's drop.
unsafe impl<H: Send + Sync> Send for Context<H> {}
// SAFETY: as above.
unsafe impl<H: Send + Sync> Sync for Context<H> {}

impl<H: Send + Sync + 'static> Context<H> {
    pub(crate) fn new<F: Send + Sync + 'static>(placement: Placement, header: H, callback: F) -> Self {
        unsafe fn free<T>(p: NonNull<c_void>) {
            // SAFETY: `p` came from `Box::<T>::into_raw` in `new` and is freed once.
            drop(unsafe { Box::from_raw(p.as_ptr().cast::<T>()) });
        }
        let raw = Box::into_raw(Box::new(Shared { placement, header, callback })).cast::<c_void>();
        // SAFETY: `Box::into_raw` never returns null.
        let ptr = unsafe { NonNull::new_unchecked(raw) };
        Self { ptr, free: free::<Shared<H, F>>, _header: PhantomData }
    }
}

impl<H> Context<H> {
    pub(crate) fn as_ptr(&self) -> *mut c_void {
        self.ptr.as_ptr()
    }

    pub(crate) fn header(&self) -> &H {
        // SAFETY: the allocation is a live `repr(C)` `Shared<H, F>`; the
        // offset of `header` depends only on the placement before it and on
        // `H`, so it is the same in `Shared<H, ()>`. Only the header's place
        // is projected, never the whole struct.
        unsafe { &*core::ptr::addr_of!((*self.ptr.as_ptr().cast::<Shared<H, ()>>()).header) }
    }
}

impl<H> Drop for Context<H> {
    fn drop(&mut self) {
        // SAFETY: `free` was instantiated for the type `ptr` was allocated with.
        unsafe { (self.free)(self.ptr) }
    }
}

/// Recovers the typed context inside a trampoline.
///
/// # Safety
/// `ptr` must be the pointer of a live [`Context`] created from a
/// `Shared<H, F>`, and the returned reference must not be used after that
/// context is freed (owners free it only after draining every callback).
pub(crate) unsafe fn get<'a, H, F>(ptr: *mut c_void) -> &'a Shared<H, F> {
    // SAFETY: guaranteed by the caller.
    unsafe { &*ptr.cast::<Shared<H, F>>() }
}
