//! The named-pipe server of `tests/support/pipe_server.rs` under hostile
//! clients, bounded (`tests/support/hostile_pipe.rs`; the full versions in
//! `tests/pipe_stress.rs`).

use std::time::Duration;

use crate::{hostile_pipe, rounds, support};

/// Every scenario of `support/hostile_pipe.rs` at bounded numbers, in one
/// process of its own (they read the process's threads, handles and
/// memory): each one's warm-up round, one wait for the threads to idle
/// out and the baseline, each one's measured round, one wait and the leak
/// checks for all of them (`support/rounds.rs`).
#[test]
fn hostile_clients_leave_the_pipe_server_serving_and_nothing_behind() {
    support::alone("pipe_hostile::hostile_clients_leave_the_pipe_server_serving_and_nothing_behind", || {
        drop(rounds::run_all(vec![
            hostile_pipe::come_and_go(1_000, 4, 1),
            hostile_pipe::idle(1_000, Duration::from_millis(500), 1),
            hostile_pipe::never_reads(32, 1),
            hostile_pipe::trickle(20, 10, Duration::from_millis(100), 1),
            hostile_pipe::flood(Duration::from_millis(500), 1),
        ]))
    });
}
