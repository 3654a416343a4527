//! Time for async code: the futures that wait for time ([`sleep`],
//! [`sleep_until`], [`interval`], [`timeout`]), and [`Deadline`], when a
//! timer fires or a wait times out. For a callback on a pool thread at a
//! given time, with no future, reach for [`crate::timer`] (`TP_TIMER`).
//!
//! Every arming method ([`TimerObject::arm`](crate::timer::TimerObject::arm),
//! [`PeriodicTimerObject::arm`](crate::timer::PeriodicTimerObject::arm),
//! [`WaitObject::arm`](crate::wait::WaitObject::arm), and the re-arms of
//! [`TimerFiring`](crate::TimerFiring) and
//! [`WaitActivation`](crate::WaitActivation)) takes `impl Into<Deadline>`, so
//! each accepts the three ways Rust names a point in time:
//!
//! | argument | meaning | follows wall-clock changes |
//! |---|---|---|
//! | [`Duration`](std::time::Duration) | that long after the arming call | no |
//! | [`Instant`](std::time::Instant) | that point on the monotonic clock, as a delay computed when armed (a past instant: at once) | no |
//! | [`SystemTime`](std::time::SystemTime) | that wall-clock time (a past time: at once) | yes |
//! | [`Deadline::NEVER`] | never (a wait without timeout) | |
//!
//! The pool takes a due time as a signed count of 100 ns units in a
//! `FILETIME`: negative is relative, positive is absolute (since 1601), zero
//! is "immediately". A relative delay is rounded *up*, so nothing fires
//! early. Nothing is rejected: a delay or time too far off to represent
//! (beyond about 29,227 years) saturates to the farthest one, never in
//! practice, as `tokio::time` treats it; a wall-clock time at or before 1601
//! means "at once", like any past time. A relative due time does not count
//! time the system spends asleep; an absolute one does (documented for
//! `SetThreadpoolTimer`).

//! # Futures
//! [`sleep()`], [`interval()`] and [`timeout()`] follow `tokio::time`, but need
//! no runtime: they are completed by one pool timer (`TP_TIMER` on the
//! default pool) that drives a queue of every pending sleep of the process,
//! ordered by deadline. The timer is armed for the earliest deadline; its
//! callback wakes every sleep that is due and re-arms for the next. So they
//! work under any executor (this crate's [`task`](crate::task), `futures`'
//! `block_on`, tokio, smol), and 100,000 concurrent sleeps are 100,000
//! queue entries, not 100,000 timer objects.
//!
//! ```
//! use std::time::Duration;
//! use windows_threadpool::{task, time};
//!
//! task::block_on(async {
//!     time::sleep(Duration::from_millis(1)).await;
//!     let slow = time::sleep(Duration::from_secs(60));
//!     assert!(time::timeout(Duration::from_millis(1), slow).await.is_err());
//! });
//! ```
//!
//! A sleep is registered when first polled (a future does nothing until
//! polled) with the deadline fixed when it was made. Dropping it before its
//! deadline removes its entry under the queue's lock: nothing blocks and
//! nothing is left behind, so a dropped `sleep` (the common end of a
//! [`timeout`] whose future finished first) costs nothing after its
//! deadline. A deadline too far off to represent means never: such a sleep
//! never registers and stays pending.
//!
//! Sleeps fire in deadline order with the pool timer's resolution: never
//! early, and late by the timer's granularity (on Windows, the system timer
//! resolution unless raised; under Wine, about a millisecond).

mod delay;
mod driver;
mod limit;
mod ticks;

pub use crate::sys::deadline::Deadline;
pub use delay::{Sleep, sleep, sleep_until};
pub use limit::{Elapsed, Timeout, timeout, timeout_at};
pub use ticks::{Interval, MissedTickBehavior, interval, interval_at};
