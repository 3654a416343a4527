//! Leak checks, short version: 2,000 create/arm/drop cycles per object type
//! and per async future, after a warm-up round; contexts and I/O operation
//! blocks must come back exactly, process handles and private bytes within
//! a stated slack (`support/leak.rs`). `tests/leak_stress.rs` runs 100,000
//! cycles each (`cargo xtask stress`). The counts are the process's: each
//! test runs in a process of its own (`support::alone`).
#![cfg(windows)]

use crate::leak;
use crate::support;

const CYCLES: usize = 2_000;

fn check(name: &str) {
    let kind = leak::kinds().into_iter().find(|k| k.name == name).expect("a leak kind");
    let r = leak::check(&kind, CYCLES);
    println!("{name}: {r}");
}

macro_rules! leak_tests {
    ($($name:ident),*) => {$(
        #[test]
        fn $name() {
            support::alone(concat!("leaks::", stringify!($name)), || check(stringify!($name)));
        }
    )*};
}

leak_tests!(
    work,
    timer,
    periodic_timer,
    wait,
    io,
    cleanup_group,
    time_sleep,
    wait_signalled,
    async_io_read_at,
    task_spawn,
    tcp,
    udp,
    pipe
);

/// The handle count is not vacuous (under Wine 8 `GetProcessHandleCount`
/// reports 0, where Microsoft documents "the number of open handles that
/// belong to the specified process"; the count probes handle values there).
#[test]
fn the_handle_count_sees_a_handle_come_and_go() {
    support::alone("leaks::the_handle_count_sees_a_handle_come_and_go", || {
        let before = leak::handle_count();
        let event = windows_threadpool::Event::auto_reset().unwrap();
        assert_eq!(leak::handle_count(), before + 1, "an event's handle is not counted");
        drop(event);
        assert_eq!(leak::handle_count(), before, "a closed handle is still counted");
    });
}

/// Private bytes are not vacuous (under Wine 8 `PrivateUsage` reads 0;
/// `PagefileUsage`, which Microsoft documents as the same commit charge, is
/// used there): committing 16 MiB shows.
#[test]
fn private_bytes_see_an_allocation() {
    support::alone("leaks::private_bytes_see_an_allocation", || {
        let before = leak::private_bytes();
        let v: Vec<u8> = vec![1u8; 16 << 20];
        let during = leak::private_bytes();
        assert!(during >= before + (15 << 20), "16 MiB committed: private bytes {before} -> {during}");
        drop(v);
    });
}
