//! `examples/http_server` under hostile clients, full version (opt-in
//! stress scenarios, `cargo xtask stress`, feature `hyper`): the scenarios
//! of `tests/support/hostile.rs`, whose bounded versions `tests/hyper.rs`
//! runs, at their full numbers (times `WINDOWS_THREADPOOL_STRESS_SCALE`).
//! Each ends with every connection ended, a new client's `GET /` answered
//! within 5 s, and the process's handles and memory back within the leak
//! checks' slack once its threads are back; each reports its time, its
//! threads (before, at their peak, after) and its memory before and after.
#![cfg_attr(not(all(windows, feature = "hyper")), allow(unused))]

#[cfg(all(windows, feature = "hyper"))]
mod support;

#[cfg(all(windows, feature = "hyper"))]
#[path = "support/leak.rs"]
mod leak;
#[cfg(all(windows, feature = "hyper"))]
#[path = "support/rng.rs"]
mod rng;
#[cfg(all(windows, feature = "hyper"))]
#[path = "support/stress.rs"]
mod stress;

#[cfg(all(windows, feature = "hyper"))]
#[path = "support/executors.rs"]
mod executors;
#[cfg(all(windows, feature = "hyper"))]
#[path = "support/hostile.rs"]
mod hostile;
#[cfg(all(windows, feature = "hyper"))]
#[path = "support/rounds.rs"]
mod rounds;
#[cfg(all(windows, feature = "hyper"))]
#[path = "support/server.rs"]
mod server;

#[cfg(all(windows, feature = "hyper"))]
#[path = "../examples/http_server/client.rs"]
mod client;
#[cfg(all(windows, feature = "hyper"))]
#[path = "../examples/http_server/service.rs"]
mod service;

/// Counts the Rust heap's live blocks, which the scenarios check.
#[cfg(all(windows, feature = "hyper"))]
#[global_allocator]
static HEAP: leak::CountingAlloc = leak::CountingAlloc;

#[cfg(not(all(windows, feature = "hyper")))]
fn main() {}

#[cfg(all(windows, feature = "hyper"))]
fn main() -> std::process::ExitCode {
    use std::time::Duration;
    use stress::{Ctx, Scenario};

    fn report(ctx: &Ctx, r: rounds::Report) {
        ctx.report("result", r);
    }
    let s = |name, run: fn(&Ctx)| Scenario { name, deadline: Duration::from_secs(900), run };
    stress::main(&[
        // 7 bad heads a set: 7,000 connections, one after another.
        s("http_bad_heads", |ctx| report(ctx, hostile::bad_heads(250, ctx.n(4), 0x5eed).run())),
        // Half 16 MiB header lines, half 10,000 headers, 16 at once.
        s("http_oversized_heads", |ctx| report(ctx, hostile::oversized_heads(16, ctx.n(4)).run())),
        s("http_half_close", |ctx| report(ctx, hostile::half_close(250, ctx.n(4)).run())),
        // 200 resets in the middle of a 1 MiB body, at once, 10 times.
        s("http_resets_mid_body", |ctx| report(ctx, hostile::resets_mid_body(200, ctx.n(10)).run())),
        // 3,000 connections closed with no request, 500 at once.
        s("http_dropped_without_a_request", |ctx| report(ctx, hostile::dropped_without_a_request(500, ctx.n(6)).run())),
        s("http_pipelined_flood", |ctx| report(ctx, hostile::pipelined_flood(ctx.n(20_000), 1).run())),
        s("http_idle_connections", |ctx| {
            report(ctx, hostile::idle_connections(ctx.n(2_000), Duration::from_secs(5), 1).run())
        }),
        // One byte a second, cut off at the example's header timeout.
        s("http_slowloris", |ctx| report(ctx, hostile::slowloris(ctx.n(500), Duration::from_secs(10), 1).run())),
    ])
}
