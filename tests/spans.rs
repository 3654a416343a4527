//! The `tracing` feature: every callback kind runs inside a
//! `threadpool.callback` span on a pool thread, with its fields, parented to
//! the span current where it was caused (submit, arm, issue); with the
//! crate's span filtered out, inside that span itself. Checked with a
//! small recording `Subscriber` installed as the global default (callbacks
//! run on pool threads, which a thread-local default would not reach).
#![cfg(all(windows, feature = "tracing"))]

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::ThreadId;
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};
use windows_threadpool::io::{self, Io, IoCompletion};
use windows_threadpool::{CleanupGroup, Deadline, Event as WinEvent, PeriodicTimer, Timer, Wait, Work};

/// Bounds every wait for a callback: a lost one fails the test instead of hanging it.
const PATIENCE: Duration = Duration::from_secs(30);

#[derive(Clone, Debug)]
struct SpanRec {
    name: &'static str,
    parent: Option<u64>,
    fields: BTreeMap<String, String>,
    /// The thread that created it.
    thread: ThreadId,
    meta: &'static Metadata<'static>,
}

/// Records every span; `pool_spans` off makes it uninterested in the
/// crate's spans (as a filter on the target would).
struct Recorder {
    next: AtomicU64,
    spans: Mutex<HashMap<u64, SpanRec>>,
    pool_spans: AtomicBool,
    /// `clone_span` calls, to see whether the crate captured a span.
    clones: AtomicUsize,
    /// `(span, the span it follows from)`.
    follows: Mutex<Vec<(u64, u64)>>,
    /// References held to each span (created, cloned, closed).
    refs: Mutex<HashMap<u64, usize>>,
    /// A callback span `kind` whose creation panics, as a subscriber may.
    panic_on: Mutex<Option<&'static str>>,
    /// Enables nothing above `INFO`, as `tracing_subscriber::fmt().init()`.
    info_only: AtomicBool,
    /// `(marker field, parent)` of every event with a `marker`.
    events: Mutex<Vec<(String, Option<u64>)>>,
}

/// What the recorder panics with when `panic_on` matches.
const SUBSCRIBER_PANIC: &str = "the subscriber panicked";

thread_local! {
    static STACK: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().into(), format!("{value:?}"));
    }
}

impl Subscriber for &'static Recorder {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::sometimes()
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        if self.info_only.load(SeqCst) && *meta.level() > tracing::Level::INFO {
            return false;
        }
        // A span the test names `disabled` is one the subscriber filters out.
        meta.name() != "disabled" && (!meta.target().starts_with("windows_threadpool") || self.pool_spans.load(SeqCst))
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, SeqCst);
        let parent = if attrs.is_root() {
            None
        } else if let Some(p) = attrs.parent() {
            Some(p.into_u64())
        } else {
            STACK.with(|s| s.borrow().last().copied())
        };
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let panic_on = *self.panic_on.lock().unwrap();
        if attrs.metadata().name() == "threadpool.callback"
            && panic_on.is_some()
            && fields.get("kind").map(String::as_str) == panic_on
        {
            panic!("{SUBSCRIBER_PANIC}");
        }
        let rec = SpanRec {
            name: attrs.metadata().name(),
            parent,
            fields,
            thread: std::thread::current().id(),
            meta: attrs.metadata(),
        };
        self.spans.lock().unwrap().insert(id, rec);
        self.refs.lock().unwrap().insert(id, 1);
        Id::from_u64(id)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        if let Some(s) = self.spans.lock().unwrap().get_mut(&span.into_u64()) {
            values.record(&mut Fields(&mut s.fields));
        }
    }

    fn record_follows_from(&self, span: &Id, follows: &Id) {
        self.follows.lock().unwrap().push((span.into_u64(), follows.into_u64()));
    }

    fn event(&self, event: &Event<'_>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let parent = if event.is_root() {
            None
        } else if let Some(p) = event.parent() {
            Some(p.into_u64())
        } else {
            STACK.with(|s| s.borrow().last().copied())
        };
        if let Some(marker) = fields.remove("marker") {
            self.events.lock().unwrap().push((marker, parent));
        }
    }

    fn enter(&self, span: &Id) {
        STACK.with(|s| s.borrow_mut().push(span.into_u64()));
    }

    fn exit(&self, span: &Id) {
        STACK.with(|s| {
            let mut s = s.borrow_mut();
            assert_eq!(s.pop(), Some(span.into_u64()), "spans exit in the order they entered");
        });
    }

    fn clone_span(&self, id: &Id) -> Id {
        self.clones.fetch_add(1, SeqCst);
        *self.refs.lock().unwrap().entry(id.into_u64()).or_default() += 1;
        id.clone()
    }

    fn try_close(&self, id: Id) -> bool {
        let mut refs = self.refs.lock().unwrap();
        let n = refs.entry(id.into_u64()).or_default();
        *n -= 1;
        *n == 0
    }

    fn current_span(&self) -> tracing_core::span::Current {
        match STACK.with(|s| s.borrow().last().copied()) {
            Some(id) => {
                let meta = self.spans.lock().unwrap()[&id].meta;
                tracing_core::span::Current::new(Id::from_u64(id), meta)
            }
            None => tracing_core::span::Current::none(),
        }
    }
}

/// The process's recorder, installed once as the global default.
fn recorder() -> &'static Recorder {
    static R: OnceLock<&'static Recorder> = OnceLock::new();
    R.get_or_init(|| {
        let r: &'static Recorder = Box::leak(Box::new(Recorder {
            next: AtomicU64::new(1),
            spans: Mutex::new(HashMap::new()),
            pool_spans: AtomicBool::new(true),
            clones: AtomicUsize::new(0),
            follows: Mutex::new(Vec::new()),
            refs: Mutex::new(HashMap::new()),
            panic_on: Mutex::new(None),
            info_only: AtomicBool::new(false),
            events: Mutex::new(Vec::new()),
        }));
        tracing::subscriber::set_global_default(r).expect("no other global subscriber in this test binary");
        r
    })
}

/// Serialises the tests of this binary when they share a process (`cargo
/// test`); under nextest each has its own.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static L: Mutex<()> = Mutex::new(());
    L.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A span of the test's own, entered on this thread while `f` runs.
fn in_request<R>(name: &'static str, f: impl FnOnce() -> R) -> (u64, R) {
    let span = tracing::info_span!("request", test = name);
    let id = span.id().expect("the recorder is interested in the test's spans").into_u64();
    let r = span.in_scope(f);
    (id, r)
}

/// The callback spans of `kind` on `object`, in creation order.
fn callback_spans(kind: &str, object: usize) -> Vec<(u64, SpanRec)> {
    let object = format!("{object:#x}");
    let spans = recorder().spans.lock().unwrap();
    let mut v: Vec<(u64, SpanRec)> = spans
        .iter()
        .filter(|(_, s)| {
            s.name == "threadpool.callback"
                && s.fields.get("kind").map(String::as_str) == Some(kind)
                && s.fields.get("object") == Some(&object)
        })
        .map(|(id, s)| (*id, s.clone()))
        .collect();
    v.sort_by_key(|(id, _)| *id);
    v
}

/// The span current inside a callback, by id.
fn current_id() -> Option<u64> {
    tracing::Span::current().id().map(|i| i.into_u64())
}

/// The spans `span` follows from.
fn follows(span: u64) -> Vec<u64> {
    recorder().follows.lock().unwrap().iter().filter(|(s, _)| *s == span).map(|(_, f)| *f).collect()
}

/// Checks every span: named, on a pool thread (not this one), parented to
/// `parent`, and current while its callback ran (`seen` holds what the
/// callbacks saw as current, in order).
fn check(spans: &[(u64, SpanRec)], parent: u64, seen: &[Option<u64>]) {
    let me = std::thread::current().id();
    assert!(!spans.is_empty(), "no callback span was recorded");
    for (id, s) in spans {
        assert_eq!(s.name, "threadpool.callback");
        assert_eq!(s.parent, Some(parent), "span {id} {s:?}: parent is the span current at the cause");
        assert_ne!(s.thread, me, "span {id} was created on the test thread, not a pool thread");
        assert!(seen.contains(&Some(*id)), "span {id} was not current while its callback ran: {seen:?}");
    }
}

#[test]
fn work_callbacks_run_in_a_span_parented_to_the_submitter() {
    let _l = serial();
    recorder();
    let (tx, rx) = mpsc::channel();
    let work = Work::new(move |_| tx.send(current_id()).unwrap()).unwrap();
    let raw = work.as_raw() as usize;
    let (request, ()) = in_request("work", || {
        work.submit();
        work.wait();
    });
    let seen: Vec<_> = rx.try_iter().collect();
    let spans = callback_spans("work", raw);
    assert_eq!(spans.len(), 1);
    check(&spans, request, &seen);
    assert!(!spans[0].1.fields.contains_key("result"), "work has no result");

    // Submitted with no span current: a root, whatever the pool thread has.
    work.submit();
    work.wait();
    let spans = callback_spans("work", raw);
    assert_eq!(spans.len(), 2);
    assert_eq!(spans[1].1.parent, None, "no span current at submit: a root span");
}

#[test]
fn a_cleanup_group_member_runs_in_a_span_too() {
    let _l = serial();
    recorder();
    let mut group = CleanupGroup::new().unwrap();
    let (tx, rx) = mpsc::channel();
    let member = group.create_work(move |_| tx.send(current_id()).unwrap()).unwrap();
    let raw = member.as_raw() as usize;
    let (request, ()) = in_request("group", || {
        member.submit();
        member.wait();
    });
    group.close_members();
    let seen: Vec<_> = rx.try_iter().collect();
    let spans = callback_spans("work", raw);
    assert_eq!(spans.len(), 1);
    check(&spans, request, &seen);
}

#[test]
fn work_submitted_from_a_callback_nests_under_that_callback() {
    let _l = serial();
    recorder();
    let (tx, rx) = mpsc::channel();
    let inner = Arc::new(Work::new(move |_| tx.send(current_id()).unwrap()).unwrap());
    let i2 = Arc::clone(&inner);
    let outer = Work::new(move |_| i2.submit()).unwrap();
    let (request, ()) = in_request("nested", || {
        outer.submit();
        outer.wait();
    });
    inner.wait();
    let outer_spans = callback_spans("work", outer.as_raw() as usize);
    let inner_spans = callback_spans("work", inner.as_raw() as usize);
    assert_eq!((outer_spans.len(), inner_spans.len()), (1, 1));
    assert_eq!(outer_spans[0].1.parent, Some(request));
    let seen: Vec<_> = rx.try_iter().collect();
    check(&inner_spans, outer_spans[0].0, &seen);
}

#[test]
fn timer_firings_and_their_rearms_are_parented_to_the_arming_span() {
    let _l = serial();
    recorder();
    let (tx, rx) = mpsc::channel();
    let firings = AtomicUsize::new(0);
    let timer = Timer::new(move |f| {
        tx.send(current_id()).unwrap();
        if firings.fetch_add(1, SeqCst) == 0 {
            f.rearm(Duration::ZERO);
        }
    })
    .unwrap();
    let (request, seen) = in_request("timer", || {
        timer.arm(Duration::ZERO);
        (0..2).map(|_| rx.recv_timeout(PATIENCE).expect("two firings")).collect::<Vec<_>>()
    });
    timer.stop_and_drain();
    let spans = callback_spans("timer", timer.as_raw() as usize);
    assert_eq!(spans.len(), 2, "the firing and its re-arm");
    // The re-armed firing keeps the arming's parent rather than nesting
    // under the firing that re-armed it, and follows from that firing.
    check(&spans, request, &seen);
    assert_eq!(follows(spans[0].0), Vec::<u64>::new());
    assert_eq!(follows(spans[1].0), [spans[0].0]);

    // Armed again from outside: a new parent, and nothing to follow.
    let (again, seen) = in_request("timer-again", || {
        timer.arm(Duration::ZERO);
        vec![rx.recv_timeout(PATIENCE).expect("a third firing")]
    });
    timer.stop_and_drain();
    let spans = callback_spans("timer", timer.as_raw() as usize);
    assert_eq!(spans.len(), 3);
    check(&spans[2..], again, &seen);
    assert_eq!(follows(spans[2].0), Vec::<u64>::new());
}

#[test]
fn periodic_ticks_are_parented_to_the_arming_span() {
    let _l = serial();
    recorder();
    let (tx, rx) = mpsc::channel();
    let timer = PeriodicTimer::new(Duration::from_millis(1), move |_| {
        let _ = tx.send(current_id());
    })
    .unwrap();
    let (request, seen) = in_request("periodic", || {
        timer.arm(Duration::ZERO);
        (0..3).map(|_| rx.recv_timeout(PATIENCE).expect("three ticks")).collect::<Vec<_>>()
    });
    timer.stop_and_drain();
    // Ticks may overlap on several threads, so the first three sent need not
    // be the first three spans created: every tick's span is checked
    // against what every tick saw.
    let seen: Vec<_> = seen.into_iter().chain(rx.try_iter()).collect();
    let spans = callback_spans("periodic", timer.as_raw() as usize);
    assert_eq!(spans.len(), seen.len(), "a span for every tick");
    check(&spans, request, &seen);
}

#[test]
fn wait_activations_carry_their_result_and_the_arming_span() {
    let _l = serial();
    recorder();
    let event = WinEvent::auto_reset().unwrap();
    let (tx, rx) = mpsc::channel();
    let wait = Wait::new(event.try_clone().unwrap().into(), move |a| {
        tx.send((current_id(), a.is_signalled())).unwrap();
    })
    .unwrap();
    let (signalled_in, (id1, signalled)) = in_request("wait-signalled", || {
        wait.arm(Deadline::NEVER);
        event.set().unwrap();
        rx.recv_timeout(PATIENCE).expect("an activation")
    });
    assert!(signalled);
    // The timeout is what makes this activation: nothing sets the event.
    let (timed_out_in, (id2, signalled)) = in_request("wait-timeout", || {
        wait.arm(Duration::from_millis(1));
        rx.recv_timeout(PATIENCE).expect("a timeout")
    });
    assert!(!signalled);
    wait.stop_and_drain();
    let spans = callback_spans("wait", wait.as_raw() as usize);
    assert_eq!(spans.len(), 2);
    check(&spans[..1], signalled_in, &[id1]);
    check(&spans[1..], timed_out_in, &[id2]);
    assert_eq!(spans[0].1.fields.get("result").map(String::as_str), Some("signalled"));
    assert_eq!(spans[1].1.fields.get("result").map(String::as_str), Some("timed-out"));
}

#[test]
fn a_rearmed_wait_follows_from_the_activation_that_rearmed_it() {
    let _l = serial();
    recorder();
    let event = WinEvent::auto_reset().unwrap();
    let (tx, rx) = mpsc::channel();
    let activations = AtomicUsize::new(0);
    let wait = Wait::new(event.try_clone().unwrap().into(), move |a| {
        tx.send(current_id()).unwrap();
        if activations.fetch_add(1, SeqCst) == 0 {
            // Nothing sets the event again: the timeout ends this arming.
            assert!(a.rearm(Duration::from_millis(1)));
        }
    })
    .unwrap();
    let (request, seen) = in_request("wait-rearm", || {
        wait.arm(Deadline::NEVER);
        event.set().unwrap();
        (0..2).map(|_| rx.recv_timeout(PATIENCE).expect("two activations")).collect::<Vec<_>>()
    });
    wait.stop_and_drain();
    let spans = callback_spans("wait", wait.as_raw() as usize);
    assert_eq!(spans.len(), 2);
    check(&spans, request, &seen);
    assert_eq!(spans[1].1.fields.get("result").map(String::as_str), Some("timed-out"));
    assert_eq!(follows(spans[0].0), Vec::<u64>::new());
    assert_eq!(follows(spans[1].0), [spans[0].0]);
}

#[test]
fn io_completions_carry_their_status_and_the_issuing_span() {
    let _l = serial();
    recorder();
    let path = std::env::temp_dir().join(format!("wtp-spans-{}", std::process::id()));
    std::fs::write(&path, [7u8; 64]).unwrap();
    let (tx, rx) = mpsc::channel();
    let cb = move |c: &IoCompletion| tx.send((current_id(), c.io_result())).unwrap();
    let mut read = std::fs::OpenOptions::new();
    read.read(true);
    let io = Io::new(io::open_file(&path, &read).unwrap(), cb).unwrap();
    let (first, (id1, status1)) = in_request("io-1", || {
        io.read_at(0, vec![0u8; 16]).unwrap();
        rx.recv_timeout(PATIENCE).expect("a completion")
    });
    // Past the end: a completion with a failure status.
    let (second, (id2, status2)) = in_request("io-2", || {
        io.read_at(4096, vec![0u8; 16]).unwrap();
        rx.recv_timeout(PATIENCE).expect("a completion")
    });
    io.run_down();
    let raw = io.as_raw() as usize;
    drop(io);
    let _ = std::fs::remove_file(&path);
    assert_eq!(status1, 0);
    assert_ne!(status2, 0, "reading past the end completes with an error status");
    let spans = callback_spans("io", raw);
    assert_eq!(spans.len(), 2);
    // Each operation has its own parent, captured when it was issued.
    check(&spans[..1], first, &[id1]);
    check(&spans[1..], second, &[id2]);
    assert_eq!(spans[0].1.fields.get("result"), Some(&status1.to_string()));
    assert_eq!(spans[1].1.fields.get("result"), Some(&status2.to_string()));
}

/// A subscriber that filters out the crate's callback spans but records
/// the submitter's: no callback span is created, and the callback runs
/// inside the submitter's span. A span the subscriber disabled, or none, is
/// not captured at all.
#[test]
fn without_callback_spans_the_callback_runs_in_the_submitters_span() {
    let _l = serial();
    let r = recorder();
    r.pool_spans.store(false, SeqCst);
    let (tx, rx) = mpsc::channel();
    let work = Work::new(move |_| tx.send(current_id()).unwrap()).unwrap();
    let timer = Timer::new(|_| {}).unwrap();
    let (request, ()) = in_request("uninterested", || {
        work.submit();
        work.wait();
        timer.arm(Duration::ZERO);
        timer.stop_and_drain();
    });
    let clones_before = r.clones.load(SeqCst);
    tracing::info_span!("disabled").in_scope(|| {
        assert!(tracing::Span::current().is_none(), "the recorder disabled the span");
        work.submit();
        work.wait();
    });
    work.submit();
    work.wait();
    r.pool_spans.store(true, SeqCst);
    assert_eq!(rx.try_iter().collect::<Vec<_>>(), [Some(request), None, None]);
    assert!(callback_spans("work", work.as_raw() as usize).is_empty());
    assert!(callback_spans("timer", timer.as_raw() as usize).is_empty());
    assert_eq!(r.clones.load(SeqCst), clones_before, "a span was captured with none recorded current");
}

/// The usual `tracing_subscriber::fmt().init()`: `INFO` only, so no
/// `DEBUG` callback span. What a callback of any kind logs still has the
/// span current at its cause as its parent, as under tokio's
/// `Instrument::in_current_span`.
#[test]
fn at_info_what_any_callback_logs_is_under_the_span_that_caused_it() {
    let _l = serial();
    let r = recorder();
    r.info_only.store(true, SeqCst);
    let (tx, rx) = mpsc::channel::<(&str, Option<u64>)>();
    let log = move |kind: &'static str| {
        tracing::info!(marker = kind, "in a callback");
        tx.send((kind, current_id())).unwrap();
    };
    let mut expect = Vec::new();
    let mut seen = Vec::new();
    // `cause` makes one callback per kind, in order.
    let mut run = |kinds: &[&'static str], cause: &dyn Fn()| {
        let (request, ()) = in_request(kinds[0], cause);
        for &kind in kinds {
            seen.push(rx.recv_timeout(PATIENCE).expect("the callback ran"));
            expect.push((kind, Some(request)));
        }
    };
    let l = log.clone();
    let work = Work::new(move |_| l("work")).unwrap();
    run(&["work"], &|| work.submit());
    work.wait();
    // A firing and the re-arm it makes: both under the arming span.
    let l = log.clone();
    let firings = AtomicUsize::new(0);
    let timer = Timer::new(move |f| {
        if firings.fetch_add(1, SeqCst) == 0 {
            f.rearm(Duration::ZERO);
            l("timer")
        } else {
            l("timer-rearmed")
        }
    })
    .unwrap();
    run(&["timer", "timer-rearmed"], &|| timer.arm(Duration::ZERO));
    timer.stop_and_drain();
    let event = WinEvent::auto_reset().unwrap();
    let l = log.clone();
    let wait = Wait::new(event.try_clone().unwrap().into(), move |_| l("wait")).unwrap();
    run(&["wait"], &|| {
        wait.arm(Deadline::NEVER);
        event.set().unwrap();
    });
    wait.stop_and_drain();
    let path = std::env::temp_dir().join(format!("wtp-spans-info-{}", std::process::id()));
    std::fs::write(&path, [7u8; 64]).unwrap();
    let mut read = std::fs::OpenOptions::new();
    read.read(true);
    let l = log.clone();
    let io = Io::new(io::open_file(&path, &read).unwrap(), move |_: &IoCompletion| l("io")).unwrap();
    run(&["io"], &|| _ = io.read_at(0, vec![0u8; 16]).unwrap());
    io.run_down();
    drop(io);
    let _ = std::fs::remove_file(&path);
    // Joined from another thread, so the pool runs it (not the joiner).
    let l = log.clone();
    run(&["spawn"], &|| {
        let l = l.clone();
        let h = windows_threadpool::task::spawn_blocking(move || l("spawn"));
        std::thread::spawn(move || h.join().unwrap()).join().unwrap();
    });
    let l = log.clone();
    run(&["task"], &|| {
        let l = l.clone();
        drop(windows_threadpool::task::spawn(async move { l("task") }));
    });
    r.info_only.store(false, SeqCst);
    assert_eq!(seen, expect, "the span current in each callback");
    let events: Vec<(String, Option<u64>)> = r.events.lock().unwrap().clone();
    let expect_events: Vec<(String, Option<u64>)> = expect.iter().map(|(k, p)| (k.to_string(), *p)).collect();
    assert_eq!(events, expect_events, "each event's parent");
    assert!(r.spans.lock().unwrap().values().all(|s| s.name != "threadpool.callback"), "a DEBUG span was created");
}

/// A firing that ran inside its arming's span (no callback span of its
/// own) and re-armed: the next firing, once callback spans are wanted
/// again, is under the arming span and follows from nothing, not from the
/// arming span the first firing had entered.
#[test]
fn a_rearm_from_a_callback_without_its_own_span_records_no_follows() {
    let _l = serial();
    let r = recorder();
    r.pool_spans.store(false, SeqCst);
    let (tx, rx) = mpsc::channel();
    let (gate_tx, gate_rx) = mpsc::channel::<()>();
    let gate_rx = Mutex::new(gate_rx);
    let firings = AtomicUsize::new(0);
    let timer = Timer::new(move |f| {
        tx.send(current_id()).unwrap();
        if firings.fetch_add(1, SeqCst) == 0 {
            gate_rx.lock().unwrap().recv_timeout(PATIENCE).unwrap();
            f.rearm(Duration::ZERO);
        }
    })
    .unwrap();
    let (request, first) = in_request("rearm-without-span", || {
        timer.arm(Duration::ZERO);
        rx.recv_timeout(PATIENCE).expect("the first firing")
    });
    assert_eq!(first, Some(request));
    // The first firing is still inside its callback: the second is created
    // with callback spans wanted.
    r.pool_spans.store(true, SeqCst);
    gate_tx.send(()).unwrap();
    let second = rx.recv_timeout(PATIENCE).expect("the re-armed firing");
    timer.stop_and_drain();
    let spans = callback_spans("timer", timer.as_raw() as usize);
    assert_eq!(spans.len(), 1, "only the second firing has a callback span");
    check(&spans, request, &[second]);
    assert_eq!(follows(spans[0].0), Vec::<u64>::new(), "it follows from the arming span");
}

/// Callback spans of `kind` on any object, in creation order.
fn kind_spans(kind: &str) -> Vec<(u64, SpanRec)> {
    let spans = recorder().spans.lock().unwrap();
    let mut v: Vec<(u64, SpanRec)> = spans
        .iter()
        .filter(|(_, s)| s.name == "threadpool.callback" && s.fields.get("kind").map(String::as_str) == Some(kind))
        .map(|(id, s)| (*id, s.clone()))
        .collect();
    v.sort_by_key(|(id, _)| *id);
    v
}

/// A closure task (`spawn_blocking`, and a scope's tasks) runs in a `spawn`
/// span parented to the span current at its spawn.
#[test]
fn closure_tasks_run_in_a_span_parented_to_the_spawner() {
    let _l = serial();
    recorder();
    let (tx, rx) = mpsc::channel();
    let (request, ()) = in_request("spawn", || {
        let tx = tx.clone();
        // Joined from another thread, so the pool runs it (not the joiner).
        let h = windows_threadpool::task::spawn_blocking(move || tx.send(current_id()).unwrap());
        std::thread::spawn(move || h.join().unwrap()).join().unwrap();
    });
    let seen: Vec<_> = rx.try_iter().collect();
    let spans = kind_spans("spawn");
    assert_eq!(spans.len(), 1);
    check(&spans, request, &seen);
    let (scoped, ()) = in_request("scope", || {
        windows_threadpool::scope(|s| {
            s.spawn(|| tx.send(current_id()).unwrap());
        });
    });
    let seen: Vec<_> = rx.try_iter().collect();
    let spans = kind_spans("spawn");
    assert_eq!(spans.len(), 2);
    assert_eq!(spans[1].1.parent, Some(scoped));
    assert!(seen.contains(&Some(spans[1].0)), "the scoped task's span was not current in it");
}

/// Every poll of an async task runs in a `task` span parented to the span
/// current at `task::spawn`.
#[test]
fn async_task_polls_run_in_spans_parented_to_the_spawner() {
    let _l = serial();
    recorder();
    let (tx, rx) = mpsc::channel();
    let waker: Arc<Mutex<Option<std::task::Waker>>> = Arc::default();
    let w = waker.clone();
    let mut polls = 0;
    // Pending once (keeping its waker), then ready: exactly two polls.
    let (request, h) = in_request("task", || {
        windows_threadpool::task::spawn(std::future::poll_fn(move |cx| {
            tx.send(current_id()).unwrap();
            polls += 1;
            if polls == 1 {
                *w.lock().unwrap() = Some(cx.waker().clone());
                return std::task::Poll::Pending;
            }
            std::task::Poll::Ready(())
        }))
    });
    let first = rx.recv_timeout(PATIENCE).unwrap();
    let wake = loop {
        if let Some(wk) = waker.lock().unwrap().take() {
            break wk;
        }
        std::thread::yield_now();
    };
    wake.wake();
    h.join().unwrap();
    let seen: Vec<_> = [first].into_iter().chain(rx.try_iter()).collect();
    let spans = kind_spans("task");
    assert_eq!(spans.len(), 2, "one span per poll: {spans:?}");
    check(&spans, request, &seen);
}

/// Panics in the recorder at callback spans of `kind` while alive.
struct PanicOn;

impl PanicOn {
    fn kind(kind: &'static str) -> Self {
        *recorder().panic_on.lock().unwrap() = Some(kind);
        Self
    }
}

impl Drop for PanicOn {
    fn drop(&mut self) {
        *recorder().panic_on.lock().unwrap() = None;
    }
}

/// The message of a panic payload.
fn message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// A subscriber may panic. In a closure task's span that panic is the
/// task's, handed to its joiner like any panic of the task: on a pool thread
/// (where it would otherwise abort the process) and on a scope's waiting
/// thread, which runs tasks the pool has not started (where it must not
/// unwind out of the scope while other tasks still borrow its stack).
#[test]
fn a_subscriber_panic_in_a_closure_task_span_is_the_tasks_panic() {
    let _l = serial();
    recorder();
    let _p = PanicOn::kind("spawn");
    // Joined from another thread, so the pool runs it.
    let h = windows_threadpool::task::spawn_blocking(|| 7);
    let r = std::thread::spawn(move || h.join()).join().unwrap();
    let payload = r.expect_err("the subscriber's panic is the task's");
    assert_eq!(message(&*payload), SUBSCRIBER_PANIC);
    // Every task of a scope panics in its span; the scope panics (as
    // `std::thread::scope` does) once all of them are done with the borrowed
    // counter.
    let ran = AtomicUsize::new(0);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        windows_threadpool::for_each(0..64, |_| {
            ran.fetch_add(1, SeqCst);
        })
    }));
    let payload = r.expect_err("the scope panics when a task panicked");
    assert_eq!(message(&*payload), "a scoped task panicked");
}

/// The same for an async task's poll: the subscriber's panic completes the
/// task with that panic (a pool thread would otherwise abort).
#[test]
fn a_subscriber_panic_in_a_task_poll_span_is_the_tasks_panic() {
    let _l = serial();
    recorder();
    let _p = PanicOn::kind("task");
    let h = windows_threadpool::task::spawn(async { 5 });
    let payload = h.join().expect_err("the subscriber's panic is the task's");
    assert_eq!(message(&*payload), SUBSCRIBER_PANIC);
}

/// A submit made while nobody is interested forgets the parent an earlier
/// submit captured: its callback is not put under that earlier request.
#[test]
fn a_submit_nobody_is_interested_in_forgets_the_earlier_parent() {
    let _l = serial();
    let r = recorder();
    // One pool thread: the second callback waits for the first.
    let pool = windows_threadpool::Pool::new().unwrap();
    pool.set_max_threads(1).unwrap();
    pool.set_min_threads(1).unwrap();
    let env = windows_threadpool::CallbackEnviron::new().with_pool(&pool);
    let (gate_tx, gate_rx) = mpsc::channel::<()>();
    let gate_rx = Mutex::new(gate_rx);
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let started_tx = Mutex::new(started_tx);
    let (tx, rx) = mpsc::channel();
    let runs = AtomicUsize::new(0);
    let work = Work::new_in(
        move |_| {
            if runs.fetch_add(1, SeqCst) == 0 {
                started_tx.lock().unwrap().send(()).unwrap();
                gate_rx.lock().unwrap().recv_timeout(PATIENCE).unwrap();
            }
            tx.send(current_id()).unwrap();
        },
        &env,
    )
    .unwrap();
    let (request, ()) = in_request("stale", || work.submit());
    // The first callback runs in its span, holding the one thread.
    started_rx.recv_timeout(PATIENCE).unwrap();
    r.pool_spans.store(false, SeqCst);
    work.submit();
    r.pool_spans.store(true, SeqCst);
    gate_tx.send(()).unwrap();
    work.wait();
    let seen: Vec<_> = rx.try_iter().collect();
    let spans = callback_spans("work", work.as_raw() as usize);
    assert_eq!(spans.len(), 2, "{spans:?}");
    assert_eq!(spans[0].1.parent, Some(request));
    assert_eq!(spans[1].1.parent, None, "the second callback's span is a root, not under the first request");
    assert_eq!(seen, [Some(spans[0].0), Some(spans[1].0)]);
}

/// An operation the issue refused is handed back without the span captured
/// for it: holding it does not keep the request's span open.
#[test]
fn a_refused_io_operation_does_not_keep_the_issuing_span_open() {
    let _l = serial();
    let r = recorder();
    let path = std::env::temp_dir().join(format!("wtp-spans-refused-{}", std::process::id()));
    std::fs::write(&path, [7u8; 64]).unwrap();
    let mut read = std::fs::OpenOptions::new();
    read.read(true);
    let io = Io::new(io::open_file(&path, &read).unwrap(), |_: &IoCompletion| {}).unwrap();
    let (request, refused) = in_request("refused", || {
        // SAFETY: the issue starts no I/O and says so.
        let r = unsafe { io.submit(io::Operation::new(0u8), |_, _, _| Err(std::io::Error::from_raw_os_error(5))) };
        r.expect_err("the issue refused it").into_payload()
    });
    assert_eq!(r.refs.lock().unwrap()[&request], 0, "the refused operation still holds the request's span");
    drop(refused);
    drop(io);
    let _ = std::fs::remove_file(&path);
}

/// A task woken by the time driver's timer is polled in place, on the
/// timer's thread, once the timer's callback span has closed: the poll
/// still runs in a `task` span of its own, parented to the spawner's span.
#[test]
fn a_task_polled_in_place_runs_in_its_own_task_span() {
    let _l = serial();
    recorder();
    // A sleep whose timer fires while its task is still being polled only
    // marks the task, which then polls again on its own thread: runs until
    // one wake finds the task idle (the next rounds' spans have another
    // parent), at most 100.
    let mut runs = 0;
    let (request, rx) = loop {
        runs += 1;
        assert!(runs <= 100, "in 100 runs, the sleep never woke its task idle");
        let (polls, wakes) = (windows_threadpool::task::inplace_polls(), windows_threadpool::task::idle_wakes());
        let (tx, rx) = mpsc::channel();
        let (request, h) = in_request("in-place", || {
            windows_threadpool::task::spawn(async move {
                tx.send(current_id()).unwrap();
                windows_threadpool::time::sleep(Duration::from_millis(1)).await;
                tx.send(current_id()).unwrap();
            })
        });
        h.join().unwrap();
        let polled = windows_threadpool::task::inplace_polls() > polls;
        if windows_threadpool::task::idle_wakes() > wakes {
            assert!(polled, "the second poll did not run in place");
            break (request, rx);
        }
        assert!(!polled, "a poll ran in place though no wake found its task idle");
    };
    let seen: Vec<_> = rx.try_iter().collect();
    let spans: Vec<_> = kind_spans("task").into_iter().filter(|(_, s)| s.parent == Some(request)).collect();
    assert_eq!(spans.len(), 2, "one span per poll: {spans:?}");
    check(&spans, request, &seen);
    assert_eq!(seen[1], Some(spans[1].0), "the in-place poll ran in another span");
}
