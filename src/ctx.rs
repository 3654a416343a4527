//! The heap context handed to the OS with each pool object.
//!
//! A pool object's callback receives one `*mut c_void` context. [`Context`]
//! owns that allocation with its type erased, so that the public object types
//! are not generic over the callback; the trampoline, which is generic, casts
//! the pointer back. The owner frees the context only after the object has
//! been drained and closed, which is what makes a callback unable to outlive
//! the state it captured.

use core::ffi::c_void;
use core::ptr::NonNull;

pub(crate) struct Context {
    ptr: NonNull<c_void>,
    free: unsafe fn(NonNull<c_void>),
}

// SAFETY: `Context::new` only accepts `T: Send + Sync`, and the allocation is
// only reached through shared references (callbacks) or by the owner's drop.
unsafe impl Send for Context {}
// SAFETY: as above.
unsafe impl Sync for Context {}

impl Context {
    pub(crate) fn new<T: Send + Sync + 'static>(value: T) -> Self {
        unsafe fn free<T>(p: NonNull<c_void>) {
            // SAFETY: `p` came from `Box::<T>::into_raw` in `new` and is freed once.
            drop(unsafe { Box::from_raw(p.as_ptr().cast::<T>()) });
        }
        let raw = Box::into_raw(Box::new(value)).cast::<c_void>();
        // SAFETY: `Box::into_raw` never returns null.
        let ptr = unsafe { NonNull::new_unchecked(raw) };
        Self { ptr, free: free::<T> }
    }

    pub(crate) fn as_ptr(&self) -> *mut c_void {
        self.ptr.as_ptr()
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: `free` was instantiated for the type `ptr` was allocated with.
        unsafe { (self.free)(self.ptr) }
    }
}

/// Recovers the typed context inside a trampoline.
///
/// # Safety
/// `ptr` must be the pointer of a live [`Context`] created from a `T`, and the
/// returned reference must not be used after that context is freed (owners
/// free it only after draining every callback).
pub(crate) unsafe fn get<'a, T>(ptr: *mut c_void) -> &'a T {
    // SAFETY: guaranteed by the caller.
    unsafe { &*ptr.cast::<T>() }
}
