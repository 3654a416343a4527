//! The crate's two conversions at the Win32 boundary: a call's failure
//! value into the thread's last error, and a [`Duration`] into the pool's
//! 100 ns units.

use core::time::Duration;
use std::io;

use windows_sys::Win32::Foundation::FILETIME;
use windows_sys::core::BOOL;

/// A `BOOL` result: `Ok` when nonzero, the thread's last error otherwise.
/// Call it directly on the call's result, before anything else can
/// overwrite the last error.
pub(crate) fn check(ok: BOOL) -> io::Result<()> {
    if ok == 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
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

/// A raw due time or timeout (a signed count of 100 ns units: negative is
/// relative) as the `FILETIME` the pool takes.
pub(crate) fn filetime(v: i64) -> FILETIME {
    FILETIME { dwLowDateTime: v as u32, dwHighDateTime: (v >> 32) as u32 }
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
    fn filetimes_keep_the_sign_bits() {
        let ft = filetime(-1);
        assert_eq!((ft.dwLowDateTime, ft.dwHighDateTime), (u32::MAX, u32::MAX));
        let ft = filetime(1 << 32);
        assert_eq!((ft.dwLowDateTime, ft.dwHighDateTime), (0, 1));
    }
}
