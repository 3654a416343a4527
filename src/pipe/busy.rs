//! Waiting out a pipe with no instance to spare: the tries of a client
//! whose pipe is busy and of an accept at the instance limit.

use std::time::{Duration, Instant};

use crate::time::Sleep;

/// The waits between tries: 1 ms, doubling up to 50 ms (the system gives
/// no notice of an instance's close).
#[derive(Debug)]
pub(super) struct Backoff {
    next: Duration,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(1);
    const MOST: Duration = Duration::from_millis(50);

    pub(super) fn new() -> Self {
        Self { next: Self::FIRST }
    }

    /// The next wait, ending no later than `deadline`.
    pub(super) fn sleep(&mut self, deadline: Option<Instant>) -> Sleep {
        let wait = self.next;
        self.next = (wait * 2).min(Self::MOST);
        let until = Instant::now() + wait;
        crate::time::sleep_until(deadline.map_or(until, |d| d.min(until)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_waits_double_up_to_fifty_milliseconds_and_end_by_the_deadline() {
        let mut b = Backoff::new();
        let waits: Vec<_> = (0..8)
            .map(|_| {
                let before = b.next;
                drop(b.sleep(None));
                before
            })
            .collect();
        let ms = |n| Duration::from_millis(n);
        assert_eq!(waits, [ms(1), ms(2), ms(4), ms(8), ms(16), ms(32), ms(50), ms(50)]);
        let soon = Instant::now() + ms(3);
        assert!(b.sleep(Some(soon)).deadline() <= Some(soon));
    }
}
