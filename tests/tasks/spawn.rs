//! One-off tasks: spawn, scope, join, for_each, map; results, panics, borrows,
//! and a pool limited to one thread.
#![cfg(windows)]

use crate::support;
use support::{Gate, PATIENCE, held_pool};

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use windows_threadpool::task::{spawn_blocking, spawn_blocking_in, try_spawn_blocking};
use windows_threadpool::{
    CallbackEnviron, JoinHandle, Pool, ScopedJoinHandle, Work, for_each, for_each_in, join, join_in, map, map_in,
    scope, scope_in,
};

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<JoinHandle<u32>>();
    send_sync::<ScopedJoinHandle<'static, u32>>();
};

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_default()
}

/// A one-thread pool, not held.
fn one_thread_env() -> (Pool, CallbackEnviron) {
    let pool = Pool::new().unwrap();
    pool.set_max_threads(1).unwrap();
    let env = CallbackEnviron::new().with_pool(&pool);
    (pool, env)
}

#[test]
fn join_returns_the_result() {
    assert_eq!(spawn_blocking(|| 6 * 7).join().unwrap(), 42);
    assert_eq!(try_spawn_blocking(|| String::from("x")).unwrap().join().unwrap(), "x");
    let (_pool, env) = one_thread_env();
    assert_eq!(spawn_blocking_in(|| 7u8, &env).join().unwrap(), 7);
}

#[test]
fn a_panic_is_returned_by_join() {
    let h = spawn_blocking(|| -> u32 { panic!("task boom") });
    let err = h.join().unwrap_err();
    assert_eq!(panic_message(&*err), "task boom");
    // The pool thread survived: the next task runs.
    assert_eq!(spawn_blocking(|| 1).join().unwrap(), 1);
}

/// Joining a task no pool thread can start runs it on the joining thread.
#[test]
fn join_runs_a_task_no_pool_thread_has_started() {
    let held = held_pool();
    let h = spawn_blocking_in(|| std::thread::current().id(), &held.env);
    assert!(!h.is_finished());
    assert_eq!(h.join().unwrap(), std::thread::current().id());
}

#[test]
fn a_dropped_handle_detaches_and_the_task_still_runs() {
    struct Tell(mpsc::Sender<&'static str>);
    impl Drop for Tell {
        fn drop(&mut self) {
            let _ = self.0.send("result dropped");
        }
    }
    let gate = Arc::new(Gate::default());
    let (tx, rx) = mpsc::channel();
    let g = Arc::clone(&gate);
    let t2 = tx.clone();
    let h = spawn_blocking(move || {
        g.wait();
        t2.send("ran").unwrap();
        Tell(tx)
    });
    drop(h);
    gate.open();
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), "ran");
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), "result dropped");
}

#[test]
fn is_finished_turns_true_once_the_task_has_returned() {
    let gate = Arc::new(Gate::default());
    let g = Arc::clone(&gate);
    let h = spawn_blocking(move || {
        g.wait();
        5
    });
    assert!(!h.is_finished(), "finished while its gate was shut");
    gate.open();
    let deadline = std::time::Instant::now() + PATIENCE;
    while !h.is_finished() {
        assert!(std::time::Instant::now() < deadline, "never finished");
        std::thread::yield_now();
    }
    assert_eq!(h.join().unwrap(), 5);
}

#[test]
fn many_tasks_each_deliver_their_own_result() {
    let handles: Vec<_> = (0..10_000u64).map(|i| spawn_blocking(move || i * 2)).collect();
    let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(sum, 2 * (0..10_000u64).sum::<u64>());
}

/// A task on the only thread of a pool spawns on the same pool and joins:
/// the inner task is queued behind it, so the join must run it itself.
#[test]
fn spawn_and_join_from_a_task_on_a_one_thread_pool() {
    let (_pool, env) = one_thread_env();
    let env2 = env.clone();
    let (tx, rx) = mpsc::channel();
    let _outer = spawn_blocking_in(
        move || {
            let me = std::thread::current().id();
            let inner = spawn_blocking_in(|| std::thread::current().id(), &env2).join().unwrap();
            tx.send((me, inner)).unwrap();
        },
        &env,
    );
    let (outer, inner) = rx.recv_timeout(PATIENCE).expect("deadlock: the join did not run its queued task");
    assert_eq!(outer, inner);
}

#[test]
fn spawn_from_a_work_callback() {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let work = Work::new(move |_| {
        let v = spawn_blocking(|| 9).join().unwrap();
        tx.lock().unwrap().send(v).unwrap();
    })
    .unwrap();
    work.submit();
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), 9);
    work.wait();
}

#[test]
fn scope_tasks_borrow_and_mutate_the_stack() {
    let mut a = vec![1, 2, 3];
    let mut b = 0;
    let total = AtomicUsize::new(0);
    let r = scope(|s| {
        s.spawn(|| a.push(4));
        s.spawn(|| b += 10);
        for i in 0..100 {
            let total = &total;
            s.spawn(move || total.fetch_add(i, SeqCst));
        }
        s.spawn(|| 5).join().unwrap()
    });
    assert_eq!(r, 5);
    assert_eq!(a, [1, 2, 3, 4]);
    assert_eq!(b, 10);
    assert_eq!(total.load(SeqCst), (0..100).sum());
}

/// With no pool thread free, scope's tasks finish only if the scope runs
/// them itself before returning.
#[test]
fn scope_finishes_every_task_before_it_returns() {
    let held = held_pool();
    let ran = AtomicUsize::new(0);
    scope_in(
        |s| {
            for _ in 0..8 {
                s.spawn(|| ran.fetch_add(1, SeqCst));
            }
        },
        &held.env,
    );
    assert_eq!(ran.load(SeqCst), 8);
}

/// Results nobody joined are dropped before the scope returns.
#[test]
fn scope_drops_unjoined_results_before_it_returns() {
    struct Counted<'a>(&'a AtomicUsize);
    impl Drop for Counted<'_> {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }
    let dropped = AtomicUsize::new(0);
    scope(|s| {
        for _ in 0..16 {
            s.spawn(|| Counted(&dropped));
        }
    });
    assert_eq!(dropped.load(SeqCst), 16);
}

#[test]
fn scope_panics_after_all_tasks_when_an_unjoined_task_panicked() {
    let held = held_pool();
    let ran = AtomicUsize::new(0);
    let r = catch_unwind(AssertUnwindSafe(|| {
        scope_in(
            |s| {
                s.spawn(|| panic!("task boom"));
                for _ in 0..4 {
                    s.spawn(|| ran.fetch_add(1, SeqCst));
                }
            },
            &held.env,
        )
    }));
    assert_eq!(panic_message(&*r.unwrap_err()), "a scoped task panicked");
    assert_eq!(ran.load(SeqCst), 4);
}

#[test]
fn a_joined_panic_does_not_make_the_scope_panic() {
    let got = scope(|s| s.spawn(|| panic!("joined boom")).join().map_err(|p| panic_message(&*p)));
    assert_eq!(got, Err::<(), _>("joined boom".to_string()));
}

#[test]
fn scope_resumes_the_closures_panic_after_all_tasks() {
    let held = held_pool();
    let ran = AtomicUsize::new(0);
    let r = catch_unwind(AssertUnwindSafe(|| {
        scope_in(
            |s| {
                for _ in 0..4 {
                    s.spawn(|| ran.fetch_add(1, SeqCst));
                }
                panic!("closure boom");
            },
            &held.env,
        )
    }));
    assert_eq!(panic_message(&*r.unwrap_err()), "closure boom");
    assert_eq!(ran.load(SeqCst), 4);
}

/// Tasks spawn into their own scope; nested scopes; all on one pool
/// thread, held by the callback that opened the outer scope.
#[test]
fn nested_scopes_inside_a_callback_on_a_one_thread_pool() {
    let (_pool, env) = one_thread_env();
    let env2 = env.clone();
    let (tx, rx) = mpsc::channel();
    let _outer = spawn_blocking_in(
        move || {
            let me = std::thread::current().id();
            let threads: Mutex<Vec<ThreadId>> = Mutex::new(Vec::new());
            let note = || threads.lock().unwrap().push(std::thread::current().id());
            scope_in(
                |s| {
                    for _ in 0..3 {
                        s.spawn(|| {
                            note();
                            s.spawn(note);
                            scope_in(
                                |inner| {
                                    inner.spawn(note);
                                },
                                &env2,
                            );
                        });
                    }
                },
                &env2,
            );
            tx.send((me, threads.into_inner().unwrap())).unwrap();
        },
        &env,
    );
    let (me, threads) = rx.recv_timeout(PATIENCE).expect("deadlock in nested scopes on a one-thread pool");
    assert_eq!(threads.len(), 9);
    assert!(threads.iter().all(|t| *t == me));
}

#[test]
fn join_returns_both_results() {
    let v = [1, 2, 3];
    let (a, b) = join(|| v.len(), || v.iter().sum::<i32>());
    assert_eq!((a, b), (3, 6));
}

#[test]
fn join_resumes_a_panic_of_either_side_after_both_finished() {
    let b_ran = AtomicUsize::new(0);
    let r = catch_unwind(AssertUnwindSafe(|| join(|| panic!("a boom"), || b_ran.fetch_add(1, SeqCst))));
    assert_eq!(panic_message(&*r.unwrap_err()), "a boom");
    assert_eq!(b_ran.load(SeqCst), 1);
    let r = catch_unwind(AssertUnwindSafe(|| join(|| 1, || -> u8 { panic!("b boom") })));
    assert_eq!(panic_message(&*r.unwrap_err()), "b boom");
}

#[test]
fn join_on_a_held_one_thread_pool_runs_both_here() {
    let held = held_pool();
    let me = std::thread::current().id();
    let (a, b) = join_in(|| std::thread::current().id(), || std::thread::current().id(), &held.env);
    assert_eq!((a, b), (me, me));
}

#[test]
fn for_each_visits_every_item_exactly_once() {
    const N: usize = 100_000;
    let seen: Vec<AtomicU8> = (0..N).map(|_| AtomicU8::new(0)).collect();
    for_each(0..N, |i| {
        seen[i].fetch_add(1, SeqCst);
    });
    assert!(seen.iter().all(|s| s.load(SeqCst) == 1));
}

#[test]
fn for_each_over_nothing_calls_nothing() {
    for_each(std::iter::empty::<u32>(), |_| panic!("called"));
}

/// Every item is moved out once: visited, or dropped if `f` panicked in its
/// chunk; the panic is resumed after every other item was visited.
#[test]
fn for_each_panics_after_visiting_the_rest_and_drops_each_item_once() {
    struct Item<'a>(usize, &'a [AtomicU8]);
    impl Drop for Item<'_> {
        fn drop(&mut self) {
            self.1[self.0].fetch_add(1, SeqCst);
        }
    }
    const N: usize = 10_000;
    let dropped: Vec<AtomicU8> = (0..N).map(|_| AtomicU8::new(0)).collect();
    let visited = AtomicUsize::new(0);
    let r = catch_unwind(AssertUnwindSafe(|| {
        for_each((0..N).map(|i| Item(i, &dropped)), |item| {
            if item.0 == 777 {
                panic!("item boom");
            }
            visited.fetch_add(1, SeqCst);
        })
    }));
    assert_eq!(panic_message(&*r.unwrap_err()), "item boom");
    assert!(dropped.iter().all(|d| d.load(SeqCst) == 1));
    // Only the rest of the panicking chunk is skipped.
    assert!(visited.load(SeqCst) >= N - 1024, "visited {}", visited.load(SeqCst));
}

#[test]
fn for_each_on_a_held_one_thread_pool_runs_everything_here() {
    let held = held_pool();
    let me = std::thread::current().id();
    let here = AtomicUsize::new(0);
    for_each_in(
        0..1000,
        |_| {
            if std::thread::current().id() == me {
                here.fetch_add(1, SeqCst);
            }
        },
        &held.env,
    );
    assert_eq!(here.load(SeqCst), 1000);
}

#[test]
fn nested_for_each_inside_a_task_on_a_one_thread_pool() {
    let (_pool, env) = one_thread_env();
    let env2 = env.clone();
    let (tx, rx) = mpsc::channel();
    let _outer = spawn_blocking_in(
        move || {
            let total = AtomicUsize::new(0);
            for_each_in(0..10, |_| for_each_in(0..100, |j| _ = total.fetch_add(j, SeqCst), &env2), &env2);
            tx.send(total.into_inner()).unwrap();
        },
        &env,
    );
    assert_eq!(rx.recv_timeout(PATIENCE).expect("deadlock in nested for_each"), 10 * 4950);
}

/// A detached task whose callback releases the last reference to its private
/// pool does not close the pool from that callback: the close is handed to
/// another thread.
#[cfg(feature = "trace")]
#[test]
fn a_task_holding_the_last_pool_reference_hands_the_close_off() {
    use windows_sys::Win32::System::Threading::GetCurrentThreadId;
    let out =
        support::traced_child("spawn::a_task_holding_the_last_pool_reference_hands_the_close_off", "pool", || {
            let pool = Pool::new().unwrap();
            let env = CallbackEnviron::new().with_pool(&pool);
            let gate = Arc::new(Gate::default());
            let g = Arc::clone(&gate);
            let (tx, rx) = mpsc::channel();
            drop(spawn_blocking_in(
                move || {
                    g.wait();
                    // SAFETY: no preconditions.
                    tx.send(unsafe { GetCurrentThreadId() }).unwrap();
                },
                &env,
            ));
            drop((env, pool));
            gate.open();
            let task_thread = rx.recv_timeout(PATIENCE).unwrap().to_string();
            assert_ne!(support::pool_closer(), task_thread, "the pool was closed from its own task's callback");
        });
    out.assert_completed();
}

/// `may_run_long` reaches the task callback's instance: on a pool of one
/// thread, that thread is the last (`Some(false)`, on Windows too: Wine's
/// `test_tp_group_cancel`, `STATUS_TOO_MANY_THREADS`); on a pool of two, the
/// pool can take another (`Some(true)`). Outside a task's pool callback,
/// and in a task its joiner runs, there is no instance (`None`).
#[test]
fn may_run_long_asks_the_pool_from_a_task_callback() {
    use windows_threadpool::task::may_run_long;
    assert_eq!(may_run_long(), None);
    for (threads, expect) in [(1, Some(false)), (2, Some(true))] {
        let pool = Pool::new().unwrap();
        pool.set_max_threads(threads).unwrap();
        let env = CallbackEnviron::new().with_pool(&pool);
        let (tx, rx) = mpsc::channel();
        // Not joined: a join could run the task here, outside the pool.
        drop(spawn_blocking_in(move || tx.send(may_run_long()).unwrap(), &env));
        assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), expect, "on a pool of {threads} thread(s)");
    }
    let held = held_pool();
    assert_eq!(spawn_blocking_in(may_run_long, &held.env).join().unwrap(), None);
}

/// A scoped handle kept in another task's result, joined from that result's
/// `Drop` during the scope's clean-up: the clean-up drops the results whose
/// handles are gone first, so the join finds its result; and whoever comes
/// second never touches the slot (`DONE -> TAKEN` decides).
#[test]
fn a_handle_kept_in_a_result_joins_from_its_drop() {
    struct JoinsOnDrop<'s>(Option<ScopedJoinHandle<'s, String>>, Arc<Mutex<Option<String>>>);
    impl Drop for JoinsOnDrop<'_> {
        fn drop(&mut self) {
            if let Some(h) = self.0.take() {
                *self.1.lock().unwrap() = Some(h.join().unwrap());
            }
        }
    }
    for _ in 0..50 {
        let got = Arc::new(Mutex::new(None));
        scope(|s| {
            let b = s.spawn(|| "b".to_string());
            let g = Arc::clone(&got);
            drop(s.spawn(move || JoinsOnDrop(Some(b), g)));
        });
        assert_eq!(got.lock().unwrap().take().as_deref(), Some("b"));
    }
}

/// A detached task's result that panics on drop is dropped by the pool
/// callback: the process aborts with a message, never unwinding into the
/// pool (which Rust turns into an abort without one).
#[test]
fn a_detached_result_panicking_on_drop_aborts_with_a_message() {
    let out = support::child("spawn::a_detached_result_panicking_on_drop_aborts_with_a_message", &[], || {
        struct Bomb;
        impl Drop for Bomb {
            fn drop(&mut self) {
                panic!("bomb");
            }
        }
        let gate = Arc::new(Gate::default());
        let g = Arc::clone(&gate);
        drop(spawn_blocking(move || {
            g.wait();
            Bomb
        }));
        gate.open();
        std::thread::sleep(PATIENCE);
    });
    assert!(!out.completed(), "the child should have aborted: {out:#?}");
    assert!(out.stderr.contains("dropping a detached task's result in a pool callback panicked; aborting"), "{out:#?}");
}

/// A submission the pool refuses gives back every reference it took: the
/// task (and the closure in it) is freed, and the error is the OS's.
#[test]
fn a_refused_submission_frees_the_task_and_reports_the_error() {
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }
    let dropped = Arc::new(AtomicUsize::new(0));
    let counted = Counted(Arc::clone(&dropped));
    windows_threadpool::task::fail_next_submits(1);
    let r = try_spawn_blocking(move || drop(counted));
    let err = r.expect_err("the injected failure is reported");
    assert_eq!(err.raw_os_error(), Some(windows_sys::Win32::Foundation::ERROR_NOT_ENOUGH_MEMORY as i32));
    assert_eq!(dropped.load(SeqCst), 1, "the refused task was not freed");
    // The next submission is not refused.
    assert_eq!(try_spawn_blocking(|| 3).unwrap().join().unwrap(), 3);
}

/// The same for a scoped task's handle.
#[test]
fn a_scoped_handle_is_finished_once_its_task_has_returned() {
    let gate = Gate::default();
    windows_threadpool::scope(|s| {
        let h = s.spawn(|| {
            gate.wait();
            5
        });
        let early = h.is_finished();
        // Opened before asserting: the scope waits for the task.
        gate.open();
        assert!(!early, "finished while its gate was shut");
        let deadline = std::time::Instant::now() + PATIENCE;
        while !h.is_finished() {
            assert!(std::time::Instant::now() < deadline, "never finished");
            std::thread::yield_now();
        }
        assert_eq!(h.join().unwrap(), 5);
    });
}

/// A scope ends even when a task's handle was forgotten (its task's result
/// is then dropped in the scope's last round), and drops that result.
#[test]
fn a_scope_with_a_forgotten_handle_ends_and_drops_the_result() {
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }
    let dropped = Arc::new(AtomicUsize::new(0));
    let d = Arc::clone(&dropped);
    let (tx, rx) = mpsc::channel();
    // On its own thread: a scope that never ends fails the test, not hangs it.
    let d2 = Arc::clone(&dropped);
    std::thread::spawn(move || {
        // Only the forgotten one: its first round drops nothing.
        windows_threadpool::scope(|s| std::mem::forget(s.spawn(move || Counted(d))));
        tx.send(()).unwrap();
        // With a joined sibling, whose result is taken, never dropped again.
        windows_threadpool::scope(|s| {
            std::mem::forget(s.spawn(move || Counted(d2)));
            let joined = Arc::new(AtomicUsize::new(0));
            drop(s.spawn(move || Counted(joined)).join().unwrap());
        });
        tx.send(()).unwrap();
    });
    rx.recv_timeout(PATIENCE).expect("the scope ended");
    rx.recv_timeout(PATIENCE).expect("the second scope ended");
    assert_eq!(dropped.load(SeqCst), 2, "each forgotten task's result was dropped once");
}

/// A scoped task on a private pool gives up its pool reference when its
/// handle and the scope are done with it: the pool, dropped by its owner
/// meanwhile, is then closed.
#[cfg(feature = "trace")]
#[test]
fn a_scoped_task_releases_its_private_pool() {
    let out = support::traced_child("spawn::a_scoped_task_releases_its_private_pool", "pool", || {
        let pool = Pool::new().unwrap();
        let env = CallbackEnviron::new().with_pool(&pool);
        drop(pool);
        windows_threadpool::scope_in(
            |s| {
                // Dropped unjoined.
                drop(s.spawn(|| 1));
            },
            &env,
        );
        drop(env);
        support::pool_closer();
    });
    out.assert_completed();
}

/// A task callback's instance is forgotten when it returns: a work callback
/// that runs next on the same (only) pool thread is not a task, and
/// `may_run_long` there answers `None`.
#[test]
fn may_run_long_forgets_the_instance_when_the_task_returns() {
    use windows_threadpool::task::may_run_long;
    let pool = Pool::new().unwrap();
    pool.set_max_threads(1).unwrap();
    pool.set_min_threads(1).unwrap();
    let env = CallbackEnviron::new().with_pool(&pool);
    let (tx, rx) = mpsc::channel();
    let t = tx.clone();
    drop(spawn_blocking_in(move || t.send(("task", may_run_long())).unwrap(), &env));
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), ("task", Some(false)));
    let work = windows_threadpool::Work::new_in(move |_| tx.send(("work", may_run_long())).unwrap(), &env).unwrap();
    work.submit();
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), ("work", None));
    work.wait();
}

/// `for_each` over an iterator that cannot say how long it is (`size_hint`
/// of `(0, None)`) runs every item once.
#[test]
fn for_each_over_an_iterator_of_unknown_length_runs_every_item_once() {
    let mut next = 0usize;
    let items = std::iter::from_fn(move || {
        next += 1;
        (next <= 1000).then_some(next)
    });
    assert_eq!(items.size_hint(), (0, None));
    let seen: Vec<AtomicU8> = (0..=1000).map(|_| AtomicU8::new(0)).collect();
    windows_threadpool::for_each(items, |i| {
        seen[i].fetch_add(1, SeqCst);
    });
    assert_eq!(seen[0].load(SeqCst), 0);
    assert!(seen[1..].iter().all(|s| s.load(SeqCst) == 1), "an item ran other than once");
}

/// One item: no helper is needed, and the item runs (here).
#[test]
fn for_each_over_one_item_runs_it() {
    let ran = AtomicUsize::new(0);
    windows_threadpool::for_each([7usize], |i| {
        ran.fetch_add(i, SeqCst);
    });
    assert_eq!(ran.load(SeqCst), 7);
}

#[test]
fn map_keeps_the_order_of_100k_items() {
    const N: u64 = 100_000;
    let out = map(0..N, |i| i * i);
    assert_eq!(out.len(), N as usize);
    assert!(out.iter().enumerate().all(|(i, &v)| v == (i as u64) * (i as u64)), "a result out of place");
}

#[test]
fn map_over_nothing_calls_nothing() {
    let out: Vec<u8> = map(std::iter::empty::<u32>(), |_| panic!("called"));
    assert!(out.is_empty());
}

#[test]
fn map_over_one_item() {
    assert_eq!(map([7usize], |i| i * 6), [42]);
}

/// `filter` cannot say how many items it holds (a lower bound of 0): every
/// result is gathered past the preallocated part and put in order.
#[test]
fn map_over_an_iterator_without_a_length_keeps_the_order() {
    let items = (0..100_000u32).filter(|i| i % 3 == 0);
    assert_eq!(items.size_hint().0, 0);
    let out = map(items, |i| i.to_string());
    let expect: Vec<String> = (0..100_000u32).filter(|i| i % 3 == 0).map(|i| i.to_string()).collect();
    assert_eq!(out, expect);
}

/// Counts its drops in a slot of its own.
#[derive(Debug)]
struct Counted<'a>(usize, &'a [AtomicU8]);
impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.1[self.0].fetch_add(1, SeqCst);
    }
}

/// Results are moved into the output, never dropped on the way.
#[test]
fn map_results_are_dropped_only_with_the_output() {
    const N: usize = 10_000;
    let dropped: Vec<AtomicU8> = (0..N).map(|_| AtomicU8::new(0)).collect();
    let out = map(0..N, |i| Counted(i, &dropped));
    assert!(dropped.iter().all(|d| d.load(SeqCst) == 0));
    assert!(out.iter().enumerate().all(|(i, c)| c.0 == i));
    drop(out);
    assert!(dropped.iter().all(|d| d.load(SeqCst) == 1));
}

/// A panic in `f`: every item is moved out once, every result made before
/// the panic is dropped once, and the panic is resumed after the rest ran.
#[test]
fn map_panics_after_the_rest_and_drops_each_item_and_result_once() {
    const N: usize = 10_000;
    for spilled in [false, true] {
        let items: Vec<AtomicU8> = (0..N).map(|_| AtomicU8::new(0)).collect();
        let results: Vec<AtomicU8> = (0..N).map(|_| AtomicU8::new(0)).collect();
        let made = AtomicUsize::new(0);
        // Slots for a range; a lower bound of 0 for the filter.
        let source: Box<dyn Iterator<Item = usize> + Send> =
            if spilled { Box::new((0..N).filter(|_| true)) } else { Box::new(0..N) };
        let r = catch_unwind(AssertUnwindSafe(|| {
            map(source.map(|i| Counted(i, &items)), |item| {
                if item.0 == 777 {
                    panic!("item boom");
                }
                made.fetch_add(1, SeqCst);
                Counted(item.0, &results)
            })
        }));
        assert_eq!(panic_message(&*r.unwrap_err()), "item boom");
        assert!(items.iter().all(|d| d.load(SeqCst) == 1), "an item dropped other than once");
        assert!(results.iter().all(|d| d.load(SeqCst) <= 1), "a result dropped twice");
        let dropped: usize = results.iter().map(|d| usize::from(d.load(SeqCst))).sum();
        assert_eq!(dropped, made.load(SeqCst), "a result leaked (filter: {spilled})");
        // Only the rest of the panicking chunk is skipped.
        assert!(made.load(SeqCst) >= N - 1024, "made {}", made.load(SeqCst));
    }
}

#[test]
fn map_on_a_held_one_thread_pool_runs_everything_here() {
    let held = held_pool();
    let me = std::thread::current().id();
    let out = map_in(0..1000, |i| (i, std::thread::current().id() == me), &held.env);
    assert_eq!(out, (0..1000).map(|i| (i, true)).collect::<Vec<_>>());
}

#[test]
fn nested_map_inside_a_task_on_a_one_thread_pool() {
    let (_pool, env) = one_thread_env();
    let env2 = env.clone();
    let (tx, rx) = mpsc::channel();
    let _outer = spawn_blocking_in(
        move || {
            let rows = map_in(0..10, |i| map_in(0..100, |j| i * 100 + j, &env2), &env2);
            tx.send(rows.concat()).unwrap();
        },
        &env,
    );
    assert_eq!(rx.recv_timeout(PATIENCE).expect("deadlock in nested map"), (0..1000).collect::<Vec<_>>());
}
