//! The `Io` model, on a pipe: the model reads from the server end (the
//! `Io` under test) and writes from the client end (a second `Io`).
//!
//! Operations: create, issue a read (1 to 4 bytes), write 1 to 4 bytes,
//! cancel the latest read, `cancel_all`, `run_down`, drop, drop from the
//! own completion callback.
//!
//! Exactly once: every operation issued (`Ok`) is completed exactly once,
//! with its data or (cancelled, or cut off by a drop) with an error; a
//! synchronous failure is not issued and never completes. At every barrier
//! completions never exceed issued reads; at a `run_down` no other thread
//! raced, and at every drop, completions equal issued reads. `run_down` and
//! drop are fences: no completion after them unless a read was issued
//! since. Every operation block is freed (the engine checks
//! `io::live_operations` after each case).

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use windows_threadpool::io::{Io, OperationId, pipe_pair};

use super::engine::{self, Model, Owned, Probe, Slots, Step, tear_down};

#[derive(Debug, Clone)]
pub enum Op {
    Create(usize),
    Read(usize, u8),
    Write(usize, u8),
    CancelLatest(usize),
    CancelAll(usize),
    RunDown(usize),
    Drop(usize),
    DropFromCallback(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let s = 0..engine::SLOTS;
    prop_oneof![
        1 => s.clone().prop_map(Op::Create),
        4 => (s.clone(), 1u8..=4).prop_map(|(s, n)| Op::Read(s, n)),
        3 => (s.clone(), 1u8..=4).prop_map(|(s, n)| Op::Write(s, n)),
        1 => s.clone().prop_map(Op::CancelLatest),
        1 => s.clone().prop_map(Op::CancelAll),
        2 => s.clone().prop_map(Op::RunDown),
        1 => s.clone().prop_map(Op::Drop),
        1 => s.prop_map(Op::DropFromCallback),
    ]
}

struct Obj {
    reader: Io,
    writer: Io,
    probe: Arc<Probe>,
    issued: AtomicUsize,
    latest: Mutex<Option<OperationId>>,
}

impl Obj {
    fn new() -> Self {
        let (server, client) = pipe_pair().expect("pipe_pair");
        let probe = Probe::new();
        let guard = probe.guard();
        let reader = Io::new(server, move |_completion| {
            let p = guard.probe();
            p.enter();
            p.take_self();
        })
        .expect("Io::new (reader)");
        let writer = Io::new(client, |_| {}).expect("Io::new (writer)");
        Self { reader, writer, probe, issued: AtomicUsize::new(0), latest: Mutex::new(None) }
    }

    fn read(&self, n: u8) {
        self.probe.arming(|| {
            if let Ok(id) = self.reader.read(vec![0u8; n.into()]) {
                self.issued.fetch_add(1, SeqCst);
                *self.latest.lock().unwrap() = Some(id);
            }
        });
    }

    /// Nothing outstanding and nothing raced: every issued read completed.
    #[track_caller]
    fn reconcile(&self, what: &str) {
        let (runs, issued) = (self.probe.runs(), self.issued.load(SeqCst));
        assert_eq!(runs, issued, "{what}: completions vs issued reads");
        assert_eq!(self.reader.outstanding(), 0, "{what}: operations outstanding after a run-down");
    }
}

impl Owned for Obj {
    fn probe(&self) -> &Arc<Probe> {
        &self.probe
    }

    fn drop_owner(self) -> Arc<Probe> {
        let Self { reader, writer, probe, issued, .. } = self;
        tear_down(|| drop(reader));
        probe.owner_dropped();
        assert_eq!(probe.runs(), issued.load(SeqCst), "io: completions vs issued reads after the drop");
        tear_down(|| drop(writer));
        probe
    }
}

struct IoModel {
    slots: Slots<Obj>,
}

impl Model for IoModel {
    type Op = Op;

    fn slot(op: &Op) -> usize {
        match *op {
            Op::Create(s)
            | Op::Read(s, _)
            | Op::Write(s, _)
            | Op::CancelLatest(s)
            | Op::CancelAll(s)
            | Op::RunDown(s)
            | Op::Drop(s)
            | Op::DropFromCallback(s) => s,
        }
    }

    fn apply(&self, op: &Op, alone: bool) {
        let slot = Self::slot(op);
        match *op {
            Op::Create(_) => self.slots.fill(slot, Obj::new),
            Op::Read(_, n) => {
                self.slots.with(slot, |o| o.read(n));
            }
            Op::Write(_, n) => {
                self.slots.with(slot, |o| {
                    let _ = o.writer.write(vec![7u8; n.into()]);
                });
            }
            Op::CancelLatest(_) => {
                self.slots.with(slot, |o| {
                    if let Some(id) = *o.latest.lock().unwrap() {
                        let _ = o.reader.cancel(id);
                    }
                });
            }
            Op::CancelAll(_) => {
                self.slots.with(slot, |o| o.reader.cancel_all().expect("cancel_all"));
            }
            Op::RunDown(_) => {
                self.slots.with(slot, |o| {
                    o.reader.run_down();
                    o.probe.drained(alone);
                    if alone {
                        o.reconcile(&format!("io slot {slot}"));
                    }
                });
            }
            Op::Drop(_) => self.slots.drop_slot(slot),
            Op::DropFromCallback(_) => {
                if let Some(o) = self.slots.take(slot) {
                    o.reader.run_down();
                    o.reconcile(&format!("io slot {slot} (before a drop from the callback)"));
                    o.probe.rested_for_one_more();
                    let probe = Arc::clone(&o.probe);
                    self.slots.retire(&probe, true);
                    let Obj { reader, writer, .. } = o;
                    probe.hand_to_callback(reader, |r| {
                        probe.arming(|| r.read(vec![0u8; 1]).map_err(|e| e.into_parts().0).expect("read"));
                    });
                    // The read completes with this byte (or with bytes
                    // written earlier: then the callback may already have
                    // dropped the reader, and the pipe is closed). The
                    // writer's own completion is awaited before it is
                    // dropped (a drop would cancel the write).
                    let _ = writer.write(vec![7u8]);
                    writer.wait();
                    drop(writer);
                }
            }
        }
    }

    fn after_step(&self, _step: &Step<Op>) {
        self.slots.each(|i, o| {
            o.probe.check(&format!("io slot {i}"));
            let (runs, issued) = (o.probe.runs(), o.issued.load(SeqCst));
            assert!(runs <= issued, "io slot {i}: {runs} completions for {issued} issued reads");
        });
        self.slots.check_retired("io (retired)");
    }

    fn finish(&self) {
        self.slots.finish("io");
    }
}

proptest! {
    #![proptest_config(engine::config(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/objects/lifecycle/io.proptest-regressions")))]

    fn io_lifecycle_cases(steps in engine::steps(op(), 12)) {
        engine::run("io", || IoModel { slots: Slots::new(Obj::new) }, &steps);
    }
}

/// The cases, in a process of their own (the counts are the process's).
#[test]
fn io_lifecycle() {
    crate::support::alone("lifecycle::io::io_lifecycle", io_lifecycle_cases);
}
