//! The trace, end to end: the filter, the records real work and pools leave,
//! both dump formats, overflow, first-chance exceptions, and the build
//! without the feature. Anything that needs the trace armed runs in a child
//! process with the filter set (`support::traced_child`).
#![cfg(windows)]

use crate::json;
use crate::support;

use windows_threadpool::trace;

#[test]
fn json_parser_parses_and_rejects() {
    let v = json::parse(r#" {"a":[1,-2.5e3,"x\"\u0041"],"b":{"c":true,"d":null}} "#).unwrap();
    assert_eq!(v.get("a").unwrap().as_array().unwrap()[2].as_str(), Some("x\"A"));
    assert_eq!(v.get("a").unwrap().as_array().unwrap()[1].as_f64(), Some(-2500.0));
    assert_eq!(v.get("b").unwrap().get("c"), Some(&json::Json::Bool(true)));
    for bad in ["{", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "[1] x", "\"\n\"", "01x", "{\"a\":1,\"a\":2}", "-", "1."] {
        assert!(json::parse(bad).is_err(), "{bad:?} should not parse");
    }
}

#[cfg(not(feature = "trace"))]
#[test]
fn without_the_feature_nothing_is_recorded() {
    use windows_threadpool::{CallbackEnviron, Pool, Work};
    let out = support::child("trace::without_the_feature_nothing_is_recorded", &[(support::TRACE_VAR, "*")], || {
        assert_eq!(std::env::var(support::TRACE_VAR).as_deref(), Ok("*"), "the child did not get the filter");
        trace::observe_exceptions();
        assert!(!trace::enabled());
        assert!(!trace::wants("work") && !trace::wants("exception") && !trace::wants("*"));
        let pool = Pool::new().unwrap();
        let env = CallbackEnviron::new().with_pool(&pool);
        let work = Work::new_in(|_| {}, &env).unwrap();
        work.submit();
        work.wait();
        drop(work);
        trace::record("work", "submitted", 1, 2);
        assert_eq!(trace::dump(), "");
        let chrome = json::parse(&trace::dump_chrome_trace()).unwrap();
        assert_eq!(chrome.get("traceEvents").and_then(|e| e.as_array()).map(<[_]>::len), Some(0));
        trace::clear();
    });
    out.assert_completed();
}

/// One row of `trace::dump()`.
#[cfg(feature = "trace")]
use crate::rows as rows_support;
#[cfg(feature = "trace")]
use rows_support::{Row, rows, thread_id};

/// A private pool of at most two threads and a work object on it whose
/// callback submits `inner`, so that a Win32 call runs inside a callback.
#[cfg(feature = "trace")]
fn pool_scenario(submits: usize) {
    use std::sync::Arc;
    use windows_threadpool::{CallbackEnviron, Pool, Work};
    let pool = Pool::new().unwrap();
    pool.set_max_threads(2).unwrap();
    let env = CallbackEnviron::new().with_pool(&pool);
    let inner = Arc::new(Work::new_in(|_| {}, &env).unwrap());
    let i = Arc::clone(&inner);
    let outer = Work::new_in(move |_| i.submit(), &env).unwrap();
    for _ in 0..submits {
        outer.submit();
    }
    outer.wait();
    inner.wait();
    drop(outer);
    drop(Arc::into_inner(inner).expect("the outer callback's clone is freed by its drop"));
    drop(env);
    drop(pool);
}

#[cfg(feature = "trace")]
#[test]
fn filter_keeps_only_the_named_targets() {
    support::traced_child("trace::filter_keeps_only_the_named_targets", " pool , syscall", || {
        assert!(trace::enabled());
        assert!(trace::wants("syscall-enter") && trace::wants("syscall-leave") && trace::wants("syscall"));
        for t in ["work", "timer", "timer-periodic", "wait", "io", "heal", "exception", "bogus"] {
            assert!(!trace::wants(t), "{t} is not in the filter");
        }
        pool_scenario(2);
        trace::record("work", "submitted", 1, 0);
        let rows = rows(&trace::dump());
        let strays: Vec<&Row> =
            rows.iter().filter(|r| !["pool", "syscall-enter", "syscall-leave"].contains(&r.target.as_str())).collect();
        assert!(strays.is_empty(), "records outside the filter: {strays:#?}");
        for (target, event) in [
            ("pool", "created"),
            ("pool", "closed"),
            ("syscall-enter", "CreateThreadpool"),
            ("syscall-leave", "SubmitThreadpoolWork"),
            ("syscall-enter", "CloseThreadpoolWork"),
        ] {
            assert!(rows.iter().any(|r| r.is(target, event)), "no `{target} {event}` in {rows:#?}");
        }
    });
}

#[cfg(feature = "trace")]
#[test]
fn filter_reports_names_that_are_not_targets() {
    let out = support::child(
        "trace::filter_reports_names_that_are_not_targets",
        &[(support::TRACE_VAR, "work,Pool,timers"), ("WINDOWS_THREADPOOL_TRACE_CAPACITY", "many")],
        || {
            assert!(trace::wants("work"), "work is in the filter");
            assert!(!trace::wants("pool") && !trace::wants("timer"), "names are exact");
            let text = trace::dump();
            assert!(text.contains("\n# not targets, ignored: Pool, timers\n"), "{text}");
            assert!(text.contains("WINDOWS_THREADPOOL_TRACE_CAPACITY=\"many\" is not a capacity"), "{text}");
            assert!(text.contains(", capacity 262144\n"), "an invalid capacity falls back to the default: {text}");
        },
    );
    out.assert_completed();
}

#[cfg(feature = "trace")]
#[test]
fn empty_filter_is_disarmed() {
    let out = support::child("trace::empty_filter_is_disarmed", &[(support::TRACE_VAR, " ")], || {
        assert!(!trace::enabled());
        assert!(!trace::wants("work") && !trace::wants("bogus"));
        pool_scenario(1);
        trace::record("work", "submitted", 1, 0);
        let text = trace::dump();
        assert!(text.contains("disarmed") && rows(&text).is_empty(), "{text}");
        let chrome = json::parse(&trace::dump_chrome_trace()).unwrap();
        let events = chrome.get("traceEvents").and_then(|e| e.as_array()).unwrap();
        assert!(events.iter().all(|e| e.get("ph").and_then(|p| p.as_str()) == Some("M")), "{events:?}");
    });
    out.assert_completed();
}

#[cfg(feature = "trace")]
#[test]
fn work_and_pool_record_their_whole_life() {
    support::traced_child("trace::work_and_pool_record_their_whole_life", "*", || {
        let main = thread_id();
        pool_scenario(3);
        let text = trace::dump();
        assert!(text.contains(", capacity 262144\n") && !text.contains("overflow"), "{text}");
        let rows: Vec<Row> = rows(&text).into_iter().filter(|r| r.target != "exception").collect();
        // Each thread's rows are in time order.
        for r in &rows {
            let earlier = rows.iter().take_while(|x| !std::ptr::eq(*x, r)).filter(|x| x.tid == r.tid);
            assert!(earlier.clone().all(|x| x.ns <= r.ns), "{r:?} is earlier than a previous row of its thread");
        }
        // Every syscall-enter is closed by its leave on the same thread, innermost first.
        let mut stacks: std::collections::HashMap<u32, Vec<&Row>> = Default::default();
        for r in &rows {
            let stack = stacks.entry(r.tid).or_default();
            match r.target.as_str() {
                "syscall-enter" => stack.push(r),
                "syscall-leave" => {
                    let open = stack.pop().unwrap_or_else(|| panic!("{r:?} without an enter"));
                    assert_eq!((&open.event, &open.slots), (&r.event, &r.slots), "{r:?} closes {open:?}");
                }
                _ => {}
            }
        }
        assert!(stacks.values().all(Vec::is_empty), "unclosed syscalls: {stacks:#?}");

        let created: Vec<&Row> = rows.iter().filter(|r| r.is("work", "created")).collect();
        assert_eq!(created.len(), 2, "{rows:#?}");
        let (inner, outer) = (created[0].slot("work").unwrap(), created[1].slot("work").unwrap());
        // The outer work object's life on the main thread, in order.
        let life: Vec<&str> = rows
            .iter()
            .filter(|r| r.tid == main && r.target == "work" && r.slot("work") == Some(outer))
            .map(|r| r.event.as_str())
            .collect();
        assert_eq!(
            life,
            [
                "created",
                "submitted",
                "submitted",
                "submitted",
                "drained",
                "drop-begin",
                "drained",
                "drop-drained",
                "drop-closed"
            ]
        );
        assert_eq!(
            rows.iter().find(|r| r.is("work", "drained") && r.slot("work") == Some(outer)).unwrap().slot("cancelled"),
            Some(0)
        );
        // Each callback ran on a pool thread, entered then left there.
        for work in [outer, inner] {
            let on_pool: Vec<&Row> =
                rows.iter().filter(|r| r.slot("work") == Some(work) && r.event.starts_with("trampoline")).collect();
            assert_eq!(on_pool.len(), 6, "three callbacks of {work:#x}: {on_pool:#?}");
            assert!(on_pool.iter().all(|r| r.tid != main), "a callback ran on the main thread: {on_pool:#?}");
            // On each thread, this object's callbacks enter and leave in turn.
            for r in &on_pool {
                let mine: Vec<&str> = on_pool.iter().filter(|x| x.tid == r.tid).map(|x| x.event.as_str()).collect();
                assert!(mine.chunks(2).all(|p| p == ["trampoline-entered", "trampoline-left"]), "{mine:?}");
            }
        }
        // The inner submissions were made from the outer callbacks, on pool threads.
        let inner_submits: Vec<&Row> =
            rows.iter().filter(|r| r.is("work", "submitted") && r.slot("work") == Some(inner)).collect();
        assert_eq!(inner_submits.len(), 3);
        assert!(inner_submits.iter().all(|r| r.tid != main));
        // The pool outlives both work objects, and every call on it is recorded.
        let pool = rows.iter().find(|r| r.is("pool", "created")).unwrap().slot("pool").unwrap();
        let pos =
            |f: &dyn Fn(&Row) -> bool| rows.iter().position(f).unwrap_or_else(|| panic!("missing row in {rows:#?}"));
        assert!(pos(&|r| r.is("pool", "created")) < pos(&|r| r.is("work", "created")));
        assert!(
            pos(&|r| r.is("pool", "closed")) > pos(&|r| r.is("work", "drop-closed") && r.slot("work") == Some(inner))
        );
        let max = rows.iter().find(|r| r.is("syscall-enter", "SetThreadpoolThreadMaximum")).unwrap();
        assert_eq!((max.slot("pool"), max.slot("threads")), (Some(pool), Some(2)));
        assert!(rows.iter().any(|r| r.is("syscall-leave", "CloseThreadpool") && r.slot("pool") == Some(pool)));
    });
}

#[cfg(feature = "trace")]
#[test]
fn overflow_keeps_the_newest_records_in_order_and_is_announced() {
    const CAPACITY: u64 = 64;
    support::traced_child_env(
        "trace::overflow_keeps_the_newest_records_in_order_and_is_announced",
        "heal",
        &[("WINDOWS_THREADPOOL_TRACE_CAPACITY", "50")],
        || {
            let text = trace::dump();
            assert!(text.contains(", 0 records, capacity 64\n") && !text.contains("overflow"), "{text}");
            for total in [1, CAPACITY - 1, CAPACITY, CAPACITY + 1, 5 * CAPACITY + 7] {
                trace::clear();
                for i in 0..total {
                    trace::record("heal", "test-record", i, !i);
                }
                let text = trace::dump();
                let dropped = total.saturating_sub(CAPACITY);
                let rows = rows(&text);
                let kept: Vec<u64> = rows.iter().map(|r| r.slot("a").unwrap()).collect();
                assert_eq!(kept, (dropped..total).collect::<Vec<_>>(), "after {total} records:\n{text}");
                assert!(rows.iter().all(|r| r.slot("b") == Some(!r.slot("a").unwrap()) && r.is("heal", "test-record")));
                let notice = format!(
                    "\n# overflow: {dropped} records dropped (the ring holds 64; the oldest were overwritten)\n"
                );
                assert_eq!(text.contains(&notice), dropped > 0, "after {total} records:\n{text}");
                assert_eq!(text.contains("overflow"), dropped > 0, "{text}");
            }
        },
    );
}

#[cfg(feature = "trace")]
#[test]
fn dumps_racing_writers_show_whole_records_in_order() {
    const PER_THREAD: u64 = 20_000;
    support::traced_child_env(
        "trace::dumps_racing_writers_show_whole_records_in_order",
        "heal",
        &[("WINDOWS_THREADPOOL_TRACE_CAPACITY", "512")],
        || {
            let key = |t: u64| 0x9E37_79B9_7F4A_7C15u64.wrapping_mul(t + 1);
            let done = std::sync::atomic::AtomicUsize::new(0);
            let check = |text: &str| {
                let mut last: std::collections::HashMap<u64, u64> = Default::default();
                for r in rows(text) {
                    let (a, b) = (r.slot("a").unwrap(), r.slot("b").unwrap());
                    let t = a >> 32;
                    assert_eq!(b, a ^ key(t), "torn record {r:?}");
                    if let Some(prev) = last.insert(t, a) {
                        assert!(prev < a, "writer {t} out of order: {prev:#x} then {a:#x}");
                    }
                }
            };
            let dumps = std::thread::scope(|s| {
                for t in 0..2u64 {
                    let done = &done;
                    s.spawn(move || {
                        for i in 0..PER_THREAD {
                            let a = t << 32 | i;
                            trace::record("heal", "test-record", a, a ^ key(t));
                        }
                        done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    });
                }
                let mut dumps = 0;
                while done.load(std::sync::atomic::Ordering::SeqCst) < 2 {
                    check(&trace::dump());
                    dumps += 1;
                }
                dumps
            });
            let text = trace::dump();
            check(&text);
            println!("{dumps} dumps raced the writers");
            let kept = rows(&text).len() as u64;
            assert!(kept > 0 && kept <= 512);
            let dropped: u64 = text
                .lines()
                .find_map(|l| l.strip_prefix("# overflow: "))
                .and_then(|l| l.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no overflow notice:\n{}", &text[..300]));
            let incomplete: u64 = text
                .lines()
                .find_map(|l| l.strip_prefix("# ").filter(|l| l.contains("records not shown")))
                .map_or(0, |l| l.split_whitespace().next().unwrap().parse().unwrap());
            assert_eq!(kept + dropped + incomplete, 2 * PER_THREAD, "every record is accounted for");
        },
    );
}

/// Microseconds in the Chrome format to integer nanoseconds.
#[cfg(feature = "trace")]
fn us_to_ns(v: &json::Json) -> i64 {
    (v.as_f64().expect("a number") * 1000.0).round() as i64
}

#[cfg(feature = "trace")]
#[test]
fn chrome_trace_shows_callbacks_as_nested_slices_on_pool_threads() {
    support::traced_child(
        "trace::chrome_trace_shows_callbacks_as_nested_slices_on_pool_threads",
        "work,syscall",
        || {
            let main = thread_id() as u64;
            pool_scenario(4);
            let rows = rows(&trace::dump());
            let text = trace::dump_chrome_trace();
            let doc = json::parse(&text).unwrap_or_else(|e| panic!("{e}:\n{text}"));
            assert_eq!(doc.get("displayTimeUnit").and_then(|u| u.as_str()), Some("ns"));
            let events = doc.get("traceEvents").and_then(|e| e.as_array()).expect("traceEvents");
            let str_of = |e: &json::Json, k: &str| e.get(k).and_then(|v| v.as_str()).map(str::to_string);
            // (name, cat, tid, start ns, end ns, args) of each slice.
            let mut slices = Vec::new();
            let mut instants = 0;
            for e in events {
                let ph = str_of(e, "ph").expect("ph");
                if ph == "M" {
                    continue;
                }
                assert!(e.get("pid").and_then(|p| p.as_u64()).is_some(), "{e:?}");
                let tid = e.get("tid").and_then(|t| t.as_u64()).expect("tid");
                let ts = us_to_ns(e.get("ts").expect("ts"));
                match ph.as_str() {
                    "X" => {
                        let end = ts + us_to_ns(e.get("dur").expect("dur"));
                        assert!(e.get("args").and_then(|a| a.get("unfinished")).is_none(), "every slice ended: {e:?}");
                        slices.push((
                            str_of(e, "name").unwrap(),
                            str_of(e, "cat").unwrap(),
                            tid,
                            ts,
                            end,
                            e.get("args").unwrap().clone(),
                        ));
                    }
                    "i" => {
                        assert_eq!(str_of(e, "s").as_deref(), Some("t"), "{e:?}");
                        instants += 1;
                    }
                    other => panic!("unexpected phase {other}: {e:?}"),
                }
            }
            // Slices on one thread nest: each starts after or ends within the enclosing one.
            let mut tids: Vec<u64> = slices.iter().map(|s| s.2).collect();
            tids.sort_unstable();
            tids.dedup();
            let mut nested_calls = 0;
            for tid in tids {
                let mut lane: Vec<_> = slices.iter().filter(|s| s.2 == tid).collect();
                lane.sort_by_key(|s| (s.3, -s.4));
                let mut stack: Vec<&(String, String, u64, i64, i64, json::Json)> = Vec::new();
                for s in lane {
                    while stack.last().is_some_and(|top| top.4 <= s.3 && !(top.3 == s.3 && top.4 >= s.4)) {
                        stack.pop();
                    }
                    if let Some(top) = stack.last() {
                        assert!(s.4 <= top.4, "{s:?} overlaps {top:?} on thread {tid}");
                        if top.0 == "work callback" && s.1 == "syscall" {
                            nested_calls += 1;
                        }
                    }
                    stack.push(s);
                }
            }
            let callbacks: Vec<_> = slices.iter().filter(|s| s.0 == "work callback").collect();
            assert_eq!(callbacks.len(), 8, "four outer and four inner callbacks: {slices:#?}");
            assert!(callbacks.iter().all(|s| s.2 != main && s.1 == "work"), "{callbacks:#?}");
            assert!(
                callbacks.iter().all(|s| s.5.get("work").and_then(|w| w.as_str()).is_some_and(|w| w.starts_with("0x")))
            );
            assert!(nested_calls >= 4, "each outer callback's SubmitThreadpoolWork is nested in it: {slices:#?}");
            let main_calls: Vec<&str> =
                slices.iter().filter(|s| s.2 == main && s.1 == "syscall").map(|s| s.0.as_str()).collect();
            for call in [
                "CreateThreadpool",
                "SetThreadpoolThreadMaximum",
                "CreateThreadpoolWork",
                "SubmitThreadpoolWork",
                "WaitForThreadpoolWorkCallbacks",
                "CloseThreadpoolWork",
                "CloseThreadpool",
            ] {
                assert!(main_calls.contains(&call), "{call} missing from the main thread's lane: {main_calls:?}");
            }
            // Every record became exactly one slice end or one instant.
            let count = |t: &str| rows.iter().filter(|r| r.target == t || r.event == t).count();
            assert_eq!(slices.iter().filter(|s| s.1 == "syscall").count(), count("syscall-enter"));
            assert_eq!(count("syscall-enter"), count("syscall-leave"));
            assert_eq!(callbacks.len(), count("trampoline-entered"));
            assert_eq!(instants, rows.len() - 2 * slices.len());
            let created = events
                .iter()
                .find(|e| str_of(e, "name").as_deref() == Some("work created"))
                .expect("an instant per record");
            let args = created.get("args").unwrap();
            assert!(
                str_of(args, "work").unwrap().starts_with("0x") && str_of(args, "context").unwrap().starts_with("0x"),
                "{created:?}"
            );
            assert!(
                events
                    .iter()
                    .any(|e| str_of(e, "name").as_deref() == Some("process_name")
                        && str_of(e, "ph").as_deref() == Some("M")),
                "the process is named"
            );
        },
    );
}

#[cfg(feature = "trace")]
unsafe extern "system" fn swallow_test_exception(
    info: *mut windows_sys::Win32::System::Diagnostics::Debug::EXCEPTION_POINTERS,
) -> i32 {
    use windows_sys::Win32::System::Diagnostics::Debug::{EXCEPTION_CONTINUE_EXECUTION, EXCEPTION_CONTINUE_SEARCH};
    // SAFETY: the dispatcher passes valid pointers for the call's duration.
    let code = unsafe { (*(*info).ExceptionRecord).ExceptionCode as u32 };
    if code == TEST_EXCEPTION {
        SWALLOWED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        EXCEPTION_CONTINUE_EXECUTION
    } else {
        EXCEPTION_CONTINUE_SEARCH
    }
}

#[cfg(feature = "trace")]
const TEST_EXCEPTION: u32 = 0xE0C0_FFEE;
#[cfg(feature = "trace")]
static SWALLOWED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

#[cfg(feature = "trace")]
#[test]
fn a_swallowed_first_chance_exception_is_observed() {
    use windows_sys::Win32::System::Diagnostics::Debug::{AddVectoredExceptionHandler, RaiseException};
    support::traced_child_setup(
        "trace::a_swallowed_first_chance_exception_is_observed",
        "exception",
        &[],
        || {
            // Registered before the trace is armed and at the front of the
            // list: the observer, armed next, must still see the exception first.
            // SAFETY: the handler is a plain function that lives for the process.
            let handler = unsafe { AddVectoredExceptionHandler(1, Some(swallow_test_exception)) };
            assert!(!handler.is_null());
        },
        || {
            let observed = || {
                let text = trace::dump();
                let raised: Vec<Row> =
                    rows(&text).into_iter().filter(|r| r.slot("code") == Some(TEST_EXCEPTION as u64)).collect();
                for r in &raised {
                    assert!(r.is("exception", "raised") && r.tid == thread_id(), "{r:?}");
                    assert!(r.slot("address").is_some_and(|a| a != 0), "{r:?}");
                    assert!(text.contains(&format!("exception raised code=0x{TEST_EXCEPTION:x} address=0x")), "{text}");
                }
                raised.len()
            };
            // SAFETY: a continuable software exception with no arguments; the
            // handler installed by `setup` continues execution after it.
            let raise = || unsafe { RaiseException(TEST_EXCEPTION, 0, 0, core::ptr::null()) };
            // Arming the trace installed the observer.
            raise();
            assert_eq!(SWALLOWED.load(std::sync::atomic::Ordering::SeqCst), 1, "the exception was swallowed");
            assert_eq!(observed(), 1, "the observer saw the swallowed exception");
            // Installing again is a no-op: one record per exception.
            trace::observe_exceptions();
            raise();
            assert_eq!(SWALLOWED.load(std::sync::atomic::Ordering::SeqCst), 2);
            assert_eq!(observed(), 2, "one record per exception");
        },
    );
}

/// Recording (including the first record, which reads the filter and
/// allocates the ring) leaves the thread's last-error value alone, so a
/// `syscall-leave` record between a failing call and `GetLastError` cannot
/// change the error the crate reports.
#[cfg(feature = "trace")]
#[test]
fn recording_keeps_the_last_error() {
    use windows_sys::Win32::Foundation::{GetLastError, SetLastError};
    support::traced_child("trace::recording_keeps_the_last_error", "work", || {
        for code in [1234u32, 0, 87] {
            // SAFETY: no preconditions.
            unsafe { SetLastError(code) };
            trace::record("work", "submitted", 1, 2);
            // SAFETY: no preconditions.
            assert_eq!(unsafe { GetLastError() }, code);
        }
    });
}

/// A cleanup group's members record their release as a standalone object
/// records its drop: begun, drained, closed, in that order, whichever kind.
#[cfg(feature = "trace")]
#[test]
fn released_group_members_record_their_close() {
    support::traced_child("trace::released_group_members_record_their_close", "work,timer,timer-periodic,wait", || {
        use windows_threadpool::cleanup_group::CleanupGroup;
        let group = CleanupGroup::new().unwrap();
        let _ = group.create_work(|_| {}).unwrap();
        let _ = group.create_timer(|_| {}).unwrap();
        let _ = group.create_periodic_timer(std::time::Duration::from_secs(60), |_| {}).unwrap();
        let _ = group.create_wait(windows_threadpool::Event::auto_reset().unwrap().into(), |_| {}).unwrap();
        drop(group);
        let rows = rows(&trace::dump());
        for target in ["work", "timer", "timer-periodic", "wait"] {
            // Each object of the target (the group's own work among them) by
            // its first slot, the object.
            let objects: Vec<u64> = rows.iter().filter(|r| r.is(target, "created")).map(|r| r.slots[0].1).collect();
            assert!(!objects.is_empty(), "no {target} was created: {rows:#?}");
            for object in objects {
                let life: Vec<&str> = rows
                    .iter()
                    .filter(|r| r.target == target && r.slots.first().map(|s| s.1) == Some(object))
                    .map(|r| r.event.as_str())
                    .collect();
                assert!(
                    life.ends_with(&["drop-drained", "drop-closed"]) && life.contains(&"drop-begin"),
                    "a {target} did not record its release: {life:?}"
                );
            }
        }
    });
}
