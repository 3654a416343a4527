//! The named-pipe server of `tests/support/pipe_server.rs` under hostile
//! clients, full version (opt-in stress scenarios, `cargo xtask stress`):
//! the scenarios of `tests/support/hostile_pipe.rs`, whose bounded
//! versions `tests/io/pipe_hostile.rs` runs, at their full numbers (times
//! `WINDOWS_THREADPOOL_STRESS_SCALE`), each in a process of its own. Each
//! ends with every connection ended, no accept failed, a new client's
//! `ping` answered within 5 s, no teardown handed off, and the process's
//! handles and memory back within the leak checks' slack once its threads
//! are back; each reports its time, its threads (before, at their peak,
//! after) and its memory before and after.
#![cfg_attr(not(windows), allow(unused))]

#[cfg(windows)]
mod support;

#[cfg(windows)]
#[path = "support/hostile_pipe.rs"]
mod hostile_pipe;
#[cfg(windows)]
#[path = "support/leak.rs"]
mod leak;
#[cfg(windows)]
#[path = "support/pipe_server.rs"]
mod pipe_server;
#[cfg(windows)]
#[path = "support/rng.rs"]
mod rng;
#[cfg(windows)]
#[path = "support/rounds.rs"]
mod rounds;
#[cfg(windows)]
#[path = "support/stress.rs"]
mod stress;

/// Counts the Rust heap's live blocks, which the scenarios check.
#[cfg(windows)]
#[global_allocator]
static HEAP: leak::CountingAlloc = leak::CountingAlloc;

#[cfg(not(windows))]
fn main() {}

#[cfg(windows)]
fn main() -> std::process::ExitCode {
    use std::time::Duration;
    use stress::{Ctx, Scenario};

    fn report(ctx: &Ctx, r: rounds::Report) {
        ctx.report("result", r);
    }
    let s = |name, run: fn(&Ctx)| Scenario { name, deadline: Duration::from_secs(900), run };
    stress::main(&[
        // 20,000 opens and closes, from 8 threads.
        s("pipe_come_and_go", |ctx| report(ctx, hostile_pipe::come_and_go(ctx.n(5_000), 8, 4).run())),
        // Idle past Wine's idle-thread timeout, so the figure is the
        // connections' own.
        s("pipe_idle", |ctx| report(ctx, hostile_pipe::idle(ctx.n(5_000), Duration::from_secs(5), 1).run())),
        s("pipe_never_reads", |ctx| report(ctx, hostile_pipe::never_reads(ctx.n(200), 3).run())),
        s("pipe_trickle", |ctx| {
            report(ctx, hostile_pipe::trickle(ctx.n(200), 30, Duration::from_millis(100), 2).run())
        }),
        s("pipe_flood", |ctx| report(ctx, hostile_pipe::flood(Duration::from_secs(10) * ctx.scale() as u32, 2).run())),
    ])
}
