//! `examples/https_server` under hostile TLS clients (opt-in stress
//! scenarios, `cargo xtask stress`, features `hyper` and `tokio`): the
//! scenarios of `tests/support/hostile_tls.rs`, at their full numbers
//! (times `WINDOWS_THREADPOOL_STRESS_SCALE`), against the example's own
//! accept loop, connection task and application in this process. Each ends
//! with every connection ended, a new client's `GET /` over TLS answered
//! within 5 s, and the process's handles and memory back within the leak
//! checks' slack once its threads are back; each reports its time, its
//! threads (before, at their peak, after) and its memory before and after.
#![cfg_attr(not(all(windows, feature = "hyper", feature = "tokio")), allow(unused))]

#[cfg(all(windows, feature = "hyper", feature = "tokio"))]
mod support;

#[cfg(all(windows, feature = "hyper", feature = "tokio"))]
#[path = "support/leak.rs"]
mod leak;
#[cfg(all(windows, feature = "hyper", feature = "tokio"))]
#[path = "support/rng.rs"]
mod rng;
#[cfg(all(windows, feature = "hyper", feature = "tokio"))]
#[path = "support/stress.rs"]
mod stress;

#[cfg(all(windows, feature = "hyper", feature = "tokio"))]
#[path = "support/hostile_tls.rs"]
mod hostile_tls;
#[cfg(all(windows, feature = "hyper", feature = "tokio"))]
#[path = "support/rounds.rs"]
mod rounds;
#[cfg(all(windows, feature = "hyper", feature = "tokio"))]
#[path = "support/tls.rs"]
mod tls;

#[cfg(all(windows, feature = "hyper", feature = "tokio"))]
#[path = "../examples/https_server/app.rs"]
mod app;
// The example's `GET /stats` parts go unused here.
#[cfg(all(windows, feature = "hyper", feature = "tokio"))]
#[allow(dead_code)]
#[path = "../examples/https_server/serve.rs"]
mod serve;

/// Counts the Rust heap's live blocks, which the scenarios check.
#[cfg(all(windows, feature = "hyper", feature = "tokio"))]
#[global_allocator]
static HEAP: leak::CountingAlloc = leak::CountingAlloc;

#[cfg(not(all(windows, feature = "hyper", feature = "tokio")))]
fn main() {}

#[cfg(all(windows, feature = "hyper", feature = "tokio"))]
fn main() -> std::process::ExitCode {
    use std::time::Duration;
    use stress::{Ctx, Scenario};

    fn report(ctx: &Ctx, r: rounds::Report) {
        ctx.report("result", r);
    }
    let s = |name, run: fn(&Ctx)| Scenario { name, deadline: Duration::from_secs(900), run };
    stress::main(&[
        // 2,000 handshakes, then idle, then closed at once.
        s("https_idle_connections", |ctx| {
            report(ctx, hostile_tls::idle_connections(ctx.n(2_000), Duration::from_secs(5), 1).run())
        }),
        // 2 rounds of 500 resets mid-handshake, 500 right after it and 500
        // once the server completed it, one after another.
        s("https_resets", |ctx| report(ctx, hostile_tls::resets(ctx.n(500), 2).run())),
        // 10 at once, cut by the idle timeout (3 s) and then the shutdown timeout (3 s).
        s("https_never_readers", |ctx| report(ctx, hostile_tls::never_readers(ctx.n(10), 1).run())),
        // 250 ClientHellos and 250 heads, one byte a second, cut at the header timeout.
        s("https_trickle", |ctx| report(ctx, hostile_tls::trickle(ctx.n(250), Duration::from_secs(10), 1).run())),
        // 250 HTTP/2 prefaces, one byte a second, closed at the header timeout (10 s).
        s("https_preface_trickle", |ctx| report(ctx, hostile_tls::preface_trickle(ctx.n(250), 1).run())),
        // 2 rounds of 3,000 connections, one after another.
        s("https_garbage", |ctx| report(ctx, hostile_tls::garbage(ctx.n(1_000), 2, 0x5eed).run())),
    ])
}
