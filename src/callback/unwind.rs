//! Code the crate runs where no unwind may go.
//!
//! Pool callbacks are `extern "system"` functions, and an unwind may not
//! leave one. Inside them the crate runs code it does not own: the waker of
//! a future it completes (a timer's deadline, a wait's signal, an I/O
//! completion, a task's end for its `JoinHandle`), the drop of a task's
//! future or of a result nobody took. A panic there has nobody to go to (the
//! caller is the pool), and left alone it would abort with Rust's generic
//! "panic in a function that cannot unwind", naming nothing.
//!
//! The policy, at every such site: the process aborts, after the panic's
//! own message and one line naming what panicked
//! (`windows-threadpool: a waker panicked; aborting`), as std aborts when a
//! drop panics during an unwind. [`or_abort`] is the one function that
//! applies it. It holds wherever the site runs: a task finished by a thread
//! that helps while it waits wakes its joiner there, and a waker that
//! panics aborts there too, so what a waker may do does not depend on where
//! it is woken.
//!
//! The callbacks of long-lived objects ([`Work`](crate::Work), timers, waits,
//! I/O) are the user's own code; a panic in one aborts at the trampoline's
//! boundary (see the [crate docs](crate)).

use std::panic::{AssertUnwindSafe, catch_unwind};

/// Runs `f`; if it panics, prints `windows-threadpool: {what} panicked;
/// aborting` and aborts the process.
#[inline]
pub(crate) fn or_abort<R>(what: &str, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => panicked(what),
    }
}

#[cold]
fn panicked(what: &str) -> ! {
    say_and_abort(format_args!("windows-threadpool: {what} panicked; aborting"))
}

/// Prints `message` on stderr, if it can, and aborts. Not `eprintln!`,
/// which panics when stderr cannot be written: the abort must not become
/// an unwind.
#[cold]
pub(crate) fn say_and_abort(message: core::fmt::Arguments<'_>) -> ! {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{message}");
    std::process::abort()
}

/// Aborts the process if dropped: armed around code after whose panic the
/// process cannot go on (the panic's message has been printed already), and
/// forgotten once that code has returned.
pub(crate) struct AbortOnUnwind;

impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        std::process::abort();
    }
}
