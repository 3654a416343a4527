//! [`sleep`] and [`sleep_until`].

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::driver::{Driver, Entry, Key};

/// A future that completes at its deadline; made by [`sleep`] or
/// [`sleep_until`]. See the [module docs](super#futures).
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Sleep {
    /// `None`: never (a delay too long to represent).
    deadline: Option<Instant>,
    state: State,
}

#[derive(Debug)]
enum State {
    /// Not polled since made or reset.
    Unregistered,
    Registered(Arc<Entry>, Key),
    Elapsed,
}

/// Completes `duration` after this call (never, if that instant cannot be
/// represented).
pub fn sleep(duration: Duration) -> Sleep {
    Sleep { deadline: Instant::now().checked_add(duration), state: State::Unregistered }
}

/// Completes at `deadline` (at once, when polled, if it has passed).
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep { deadline: Some(deadline), state: State::Unregistered }
}

impl Sleep {
    /// When it completes; `None` for never.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Whether it has completed (returned `Ready`, or was found due).
    pub fn is_elapsed(&self) -> bool {
        match &self.state {
            State::Elapsed => true,
            State::Registered(entry, _) => entry.fired(),
            State::Unregistered => false,
        }
    }

    /// Makes it complete at `deadline` instead, whether or not it has
    /// completed; the next poll registers the new deadline.
    pub fn reset(&mut self, deadline: Instant) {
        self.unregister();
        self.deadline = Some(deadline);
        self.state = State::Unregistered;
    }

    fn unregister(&mut self) {
        if let State::Registered(entry, key) = &self.state
            && !entry.fired()
        {
            Driver::get().remove(key);
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let Some(deadline) = self.deadline else { return Poll::Pending };
        match &self.state {
            State::Elapsed => return Poll::Ready(()),
            State::Registered(entry, _) => {
                // Register, then check (see `crate::callback::waker_slot`).
                entry.waker.register(cx.waker());
                if !entry.fired() {
                    return Poll::Pending;
                }
            }
            State::Unregistered => {
                if Instant::now() < deadline {
                    let entry = Arc::new(Entry::default());
                    // Before inserting: a firing may take it at once.
                    entry.waker.register(cx.waker());
                    let key = Driver::get().insert(deadline, entry.clone());
                    self.state = State::Registered(entry, key);
                    return Poll::Pending;
                }
            }
        }
        self.state = State::Elapsed;
        Poll::Ready(())
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.unregister();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_sleep_leaves_no_entry() {
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut s = sleep(Duration::from_secs(3600));
        assert!(Pin::new(&mut s).poll(&mut cx).is_pending());
        let before = Driver::get().pending();
        assert!(before >= 1);
        drop(s);
        assert_eq!(Driver::get().pending(), before - 1);
    }

    #[test]
    fn a_reset_sleep_moves_its_entry() {
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut s = sleep(Duration::from_secs(3600));
        assert!(Pin::new(&mut s).poll(&mut cx).is_pending());
        let before = Driver::get().pending();
        s.reset(Instant::now() + Duration::from_secs(7200));
        assert_eq!(Driver::get().pending(), before - 1);
        assert!(Pin::new(&mut s).poll(&mut cx).is_pending());
        assert_eq!(Driver::get().pending(), before);
    }

    #[test]
    fn an_unrepresentable_delay_never_registers() {
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut s = sleep(Duration::MAX);
        assert_eq!(s.deadline(), None);
        let before = Driver::get().pending();
        assert!(Pin::new(&mut s).poll(&mut cx).is_pending());
        assert_eq!(Driver::get().pending(), before);
    }
}
