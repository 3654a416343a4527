//! The first-chance exception observer.

use std::sync::Once;

use windows_sys::Win32::System::Diagnostics::Debug::{
    AddVectoredExceptionHandler, EXCEPTION_CONTINUE_SEARCH, EXCEPTION_POINTERS,
};

use super::{clock::*, *};

pub(super) static OBSERVER: Once = Once::new();

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
pub(super) unsafe extern "system" fn on_exception(info: *mut EXCEPTION_POINTERS) -> i32 {
    // SAFETY: the dispatcher passes a valid `EXCEPTION_POINTERS` whose
    // record pointer is valid (or null) for the duration of the call.
    let record = unsafe { info.as_ref().and_then(|i| i.ExceptionRecord.as_ref()) };
    if let Some(r) = record {
        trace_record!("exception", "raised", r.ExceptionCode as u32, r.ExceptionAddress as usize);
    }
    EXCEPTION_CONTINUE_SEARCH
}
