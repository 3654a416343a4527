//! The crate's Win32 boundary: a call's failure value into the thread's
//! last error, a [`Duration`] or [`SystemTime`] into the pool's 100 ns
//! units, and the exports that only some systems have, resolved at run time.

pub(crate) mod deadline;
pub(crate) mod winsock;

use core::ffi::c_void;
use core::time::Duration;
use std::ffi::CStr;
use std::io;
use std::sync::OnceLock;
use std::time::SystemTime;

use windows_sys::Win32::Foundation::{FILETIME, HANDLE};
use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleA, GetProcAddress};
use windows_sys::Win32::System::Threading::{PTP_TIMER, PTP_WAIT};
use windows_sys::core::BOOL;

/// A `BOOL` result: `Ok` when nonzero, the thread's last error otherwise.
/// Call it directly on the call's result, before anything else can
/// overwrite the last error.
pub(crate) fn check(ok: BOOL) -> io::Result<()> {
    if ok == 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// An `NTSTATUS` of a query or set call (`NtQueryInformationFile`, ...):
/// `Ok` when it is a success (`NT_SUCCESS`), the status as a Win32 error
/// (`RtlNtStatusToDosError`) otherwise.
pub(crate) fn nt_check(status: windows_sys::Win32::Foundation::NTSTATUS) -> io::Result<()> {
    if status >= 0 {
        return Ok(());
    }
    // SAFETY: a pure conversion.
    Err(io::Error::from_raw_os_error(unsafe { windows_sys::Win32::Foundation::RtlNtStatusToDosError(status) } as i32))
}

/// A creating call's result (an object pointer or handle value): `Ok` when
/// it is not zero (null), the thread's last error otherwise. As for
/// [`check`], call it directly on the result.
pub(crate) fn created<T: PartialEq + Default>(raw: T) -> io::Result<T> {
    if raw == T::default() { Err(io::Error::last_os_error()) } else { Ok(raw) }
}

const TICKS_PER_SEC: u64 = 10_000_000;

/// `d` in 100 ns units, rounded up (so a timeout never ends early); `None`
/// above `i64::MAX` units (about 29,227 years).
pub(crate) fn ticks_ceil(d: Duration) -> Option<i64> {
    let whole = d.as_secs().checked_mul(TICKS_PER_SEC)?;
    let total = whole.checked_add(u64::from(d.subsec_nanos().div_ceil(100)))?;
    i64::try_from(total).ok()
}

/// A delay as the pool's relative due time: minus its 100 ns units, rounded
/// up, or 0 ("immediately") for zero. A delay beyond `i64::MAX` units (about
/// 29,227 years) saturates to that many: never in practice, as
/// `tokio::time` treats it.
pub(crate) fn relative_due(d: Duration) -> i64 {
    -ticks_ceil(d).unwrap_or(i64::MAX)
}

/// The `FILETIME` of the Unix epoch: 100 ns units from 1601-01-01 to 1970-01-01.
pub(crate) const UNIX_EPOCH_FILETIME: i64 = 116_444_736_000_000_000;

/// An instant as the pool's absolute due time, given as its offset from the
/// Unix epoch (`Ok`: after it, `Err`: before it). An instant at or before
/// 1601 has no positive `FILETIME` (a negative value would read as
/// relative), so it becomes 0, "immediately", which is what any past instant
/// means; one too late to fit in 63 bits saturates to `i64::MAX`: never, in
/// practice.
pub(crate) fn absolute_due_from_unix(offset: Result<Duration, Duration>) -> i64 {
    match offset {
        Ok(after) => ticks_ceil(after).and_then(|t| t.checked_add(UNIX_EPOCH_FILETIME)).unwrap_or(i64::MAX),
        Err(before) => UNIX_EPOCH_FILETIME.saturating_sub(ticks_ceil(before).unwrap_or(i64::MAX)).max(0),
    }
}

/// A wall-clock instant as the pool's absolute due time (see
/// [`absolute_due_from_unix`]).
pub(crate) fn absolute_due(when: SystemTime) -> i64 {
    absolute_due_from_unix(when.duration_since(SystemTime::UNIX_EPOCH).map_err(|e| e.duration()))
}

/// A raw due time or timeout (a signed count of 100 ns units: negative is
/// relative) as the `FILETIME` the pool takes.
pub(crate) fn filetime(v: i64) -> FILETIME {
    FILETIME { dwLowDateTime: v as u32, dwHighDateTime: (v >> 32) as u32 }
}

/// `SetThreadpoolTimerEx`: `SetThreadpoolTimer` that reports whether the set
/// cancelled a pending expiry.
pub(crate) type SetTimerExFn = unsafe extern "system" fn(PTP_TIMER, *const FILETIME, u32, u32) -> BOOL;
/// `SetThreadpoolWaitEx`: `SetThreadpoolWait` that reports whether the set
/// cancelled a pending callback (the last argument is reserved, null).
pub(crate) type SetWaitExFn = unsafe extern "system" fn(PTP_WAIT, HANDLE, *const FILETIME, *mut c_void) -> BOOL;

/// A system DLL every Win32 process has loaded for its whole life.
#[derive(Clone, Copy)]
pub(crate) enum SystemDll {
    Kernel32,
    Ntdll,
}

/// An export of `dll`, or `None` where this system lacks it.
pub(crate) fn system_export(dll: SystemDll, name: &CStr) -> Option<unsafe extern "system" fn() -> isize> {
    let module = match dll {
        SystemDll::Kernel32 => c"kernel32.dll",
        SystemDll::Ntdll => c"ntdll.dll",
    };
    // SAFETY: both names are NUL-terminated; the module is loaded for the
    // process's whole life, so its handle stays valid for the lookup.
    unsafe {
        let handle = GetModuleHandleA(module.as_ptr().cast());
        if handle.is_null() { None } else { GetProcAddress(handle, name.as_ptr().cast()) }
    }
}

/// `SetThreadpoolTimerEx`, looked up once: Windows 8 and later export it,
/// Wine 8 does not.
pub(crate) fn set_timer_ex() -> Option<SetTimerExFn> {
    static EXPORT: OnceLock<Option<SetTimerExFn>> = OnceLock::new();
    *EXPORT.get_or_init(|| {
        system_export(SystemDll::Kernel32, c"SetThreadpoolTimerEx").map(|f| {
            // SAFETY: the export of this name has the signature documented
            // for `SetThreadpoolTimerEx`, which `SetTimerExFn` spells out.
            unsafe { core::mem::transmute::<unsafe extern "system" fn() -> isize, SetTimerExFn>(f) }
        })
    })
}

/// `SetThreadpoolWaitEx`, looked up once (as [`set_timer_ex`]).
pub(crate) fn set_wait_ex() -> Option<SetWaitExFn> {
    static EXPORT: OnceLock<Option<SetWaitExFn>> = OnceLock::new();
    *EXPORT.get_or_init(|| {
        system_export(SystemDll::Kernel32, c"SetThreadpoolWaitEx").map(|f| {
            // SAFETY: the export of this name has the signature documented
            // for `SetThreadpoolWaitEx`, which `SetWaitExFn` spells out.
            unsafe { core::mem::transmute::<unsafe extern "system" fn() -> isize, SetWaitExFn>(f) }
        })
    })
}

/// Whether this process runs under Wine (ntdll exports `wine_get_version`).
pub(crate) fn on_wine() -> bool {
    static WINE: OnceLock<bool> = OnceLock::new();
    *WINE.get_or_init(|| system_export(SystemDll::Ntdll, c"wine_get_version").is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_become_100ns_units_rounded_up_and_never_wrap() {
        assert_eq!(ticks_ceil(Duration::ZERO), Some(0));
        assert_eq!(ticks_ceil(Duration::from_nanos(1)), Some(1));
        assert_eq!(ticks_ceil(Duration::from_nanos(100)), Some(1));
        assert_eq!(ticks_ceil(Duration::from_nanos(101)), Some(2));
        let max = Duration::new(i64::MAX as u64 / TICKS_PER_SEC, (i64::MAX as u64 % TICKS_PER_SEC) as u32 * 100);
        assert_eq!(ticks_ceil(max), Some(i64::MAX));
        assert_eq!(ticks_ceil(max + Duration::from_nanos(1)), None);
        assert_eq!(ticks_ceil(Duration::MAX), None);
    }

    #[test]
    fn delays_become_relative_due_times_that_saturate() {
        assert_eq!(relative_due(Duration::ZERO), 0, "zero is the documented 'immediately'");
        assert_eq!(relative_due(Duration::from_nanos(1)), -1, "rounded up, never early");
        assert_eq!(relative_due(Duration::from_nanos(101)), -2);
        assert_eq!(relative_due(Duration::from_millis(5)), -50_000);
        let max = Duration::new(i64::MAX as u64 / TICKS_PER_SEC, (i64::MAX as u64 % TICKS_PER_SEC) as u32 * 100);
        assert_eq!(relative_due(max), -i64::MAX);
        for beyond in [max + Duration::from_nanos(1), Duration::from_secs(u64::MAX), Duration::MAX] {
            assert_eq!(relative_due(beyond), -i64::MAX, "{beyond:?} saturates, never wraps");
        }
    }

    #[test]
    fn instants_become_absolute_due_times_that_saturate() {
        assert_eq!(absolute_due_from_unix(Ok(Duration::ZERO)), UNIX_EPOCH_FILETIME);
        assert_eq!(absolute_due_from_unix(Ok(Duration::from_nanos(150))), UNIX_EPOCH_FILETIME + 2, "rounded up");
        assert_eq!(absolute_due_from_unix(Err(Duration::from_secs(1))), UNIX_EPOCH_FILETIME - TICKS_PER_SEC as i64);
        let ticks = |t: i64| Duration::new(t as u64 / TICKS_PER_SEC, (t as u64 % TICKS_PER_SEC) as u32 * 100);
        let to_1601 = ticks(UNIX_EPOCH_FILETIME);
        assert_eq!(absolute_due_from_unix(Err(to_1601)), 0);
        assert_eq!(absolute_due_from_unix(Err(to_1601 * 2)), 0, "before 1601 is 'immediately', never relative");
        assert_eq!(absolute_due_from_unix(Err(Duration::MAX)), 0);
        let latest = ticks(i64::MAX - UNIX_EPOCH_FILETIME);
        assert_eq!(absolute_due_from_unix(Ok(latest)), i64::MAX);
        assert_eq!(absolute_due_from_unix(Ok(latest + Duration::from_nanos(100))), i64::MAX, "saturates");
        assert_eq!(absolute_due_from_unix(Ok(Duration::MAX)), i64::MAX);
        assert_eq!(absolute_due(SystemTime::UNIX_EPOCH + Duration::from_secs(1)), UNIX_EPOCH_FILETIME + 10_000_000);
    }

    #[test]
    fn filetimes_keep_the_sign_bits() {
        let ft = filetime(-1);
        assert_eq!((ft.dwLowDateTime, ft.dwHighDateTime), (u32::MAX, u32::MAX));
        let ft = filetime(1 << 32);
        assert_eq!((ft.dwLowDateTime, ft.dwHighDateTime), (0, 1));
    }
}
