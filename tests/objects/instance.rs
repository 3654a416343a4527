//! The callback instance every token gives access to (`src/instance.rs`):
//! each token type reaches the instance its trampoline received, and each
//! instance call has its documented effect. That it cannot escape the
//! callback is shown by the `compile_fail` examples in the module docs.

#![cfg(windows)]

use crate::support;

use std::io::ErrorKind;
use std::os::windows::io::AsRawHandle;
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use support::Gate;
use windows_sys::Win32::Foundation::{WAIT_OBJECT_0, WAIT_TIMEOUT};
use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, LoadLibraryW};
use windows_sys::Win32::System::Threading::WaitForSingleObject;
use windows_threadpool::Deadline;
use windows_threadpool::io::{Io, IoCompletion};
use windows_threadpool::wait::{Event, Wait};
use windows_threadpool::{CallbackEnviron, PeriodicTimer, Pool, Timer};

/// Bound on every wait for something that must happen.
const PATIENCE: Duration = Duration::from_secs(20);

/// A manual-reset event that lives for the rest of the process, as
/// `set_event_on_return` requires.
fn static_event(cell: &'static OnceLock<Event>) -> &'static Event {
    cell.get_or_init(|| Event::manual_reset().expect("CreateEventW"))
}

/// `WaitForSingleObject` on `event` with a timeout in milliseconds.
fn wait_ms(event: &Event, ms: u32) -> u32 {
    // SAFETY: the event's handle is open for the call.
    unsafe { WaitForSingleObject(event.as_handle().as_raw_handle(), ms) }
}

/// Opens the gate when dropped, so a failing assertion does not leave a
/// callback held while the object's teardown waits for it.
struct OpenOnDrop(Arc<Gate>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

fn signalled_within_patience(event: &Event) -> bool {
    wait_ms(event, PATIENCE.as_millis() as u32) == WAIT_OBJECT_0
}

#[test]
fn set_event_on_return_signals_once_the_callback_has_returned() {
    static DONE: OnceLock<Event> = OnceLock::new();
    let done = static_event(&DONE);
    let gate = Arc::new(Gate::default());
    let (tx, rx) = mpsc::channel();
    let g = Arc::clone(&gate);
    let timer = Timer::new(move |firing| {
        let inst = firing.instance();
        let first = inst.set_event_on_return(DONE.get().unwrap()).map_err(|e| e.kind());
        let second = inst.set_event_on_return(DONE.get().unwrap()).map_err(|e| e.kind());
        tx.send((first, second)).unwrap();
        g.wait();
    })
    .unwrap();
    let opener = OpenOnDrop(Arc::clone(&gate));
    timer.arm(Duration::ZERO);
    let (first, second) = rx.recv_timeout(PATIENCE).expect("the timer fired");
    assert_eq!(first, Ok(()));
    assert_eq!(second, Err(ErrorKind::AlreadyExists), "a second event for one callback must be refused");
    // The callback is still inside (held at the gate): not yet signalled.
    assert_eq!(wait_ms(done, 0), WAIT_TIMEOUT, "the event was set before the callback returned");
    drop(opener);
    assert!(signalled_within_patience(done), "the pool did not set the event after the callback returned");
    timer.stop_and_drain();
}

/// Microsoft's `CallbackMayRunLong`: TRUE if "the thread pool was able to
/// create a new thread"; the default pool's maximum is far above one.
#[test]
fn may_run_long_is_true_on_the_default_pool() {
    let (tx, rx) = mpsc::channel();
    let timer = Timer::new(move |f| tx.send(f.instance().may_run_long()).unwrap()).unwrap();
    timer.arm(Duration::ZERO);
    assert!(rx.recv_timeout(PATIENCE).expect("the timer fired"), "the default pool can always add a thread");
    timer.stop_and_drain();
}

/// FALSE on the only thread of a pool whose maximum is 1, on Windows too:
/// Wine's conformance test `dlls/ntdll/tests/threadpool.c`
/// `test_tp_group_cancel` (`TpCallbackMayRunLong` returns
/// `STATUS_TOO_MANY_THREADS` there), as Microsoft's `CallbackMayRunLong`
/// describes ("FALSE if another thread in the thread pool is not available").
#[test]
fn may_run_long_is_false_when_the_pool_cannot_add_a_thread() {
    let pool = Pool::new().unwrap();
    pool.set_max_threads(1).unwrap();
    let env = CallbackEnviron::new().with_pool(&pool);
    let (tx, rx) = mpsc::channel();
    let timer = Timer::new_in(move |f| tx.send(f.instance().may_run_long()).unwrap(), &env).unwrap();
    timer.arm(Duration::ZERO);
    assert!(
        !rx.recv_timeout(PATIENCE).expect("the timer fired"),
        "a pool at its maximum of one thread, that thread in the callback, has no other thread"
    );
    timer.stop_and_drain();
}

#[test]
fn a_periodic_tick_reaches_its_instance() {
    static DONE: OnceLock<Event> = OnceLock::new();
    let done = static_event(&DONE);
    let timer = PeriodicTimer::new(Duration::from_millis(1), |tick| {
        // Ignored after the first tick that got it in (one per tick, but
        // the event is already set then).
        let _ = tick.instance().set_event_on_return(DONE.get().unwrap());
        tick.disarm();
    })
    .unwrap();
    timer.arm(timer.period());
    assert!(signalled_within_patience(done), "a tick's instance did not set the event");
    timer.stop_and_drain();
}

#[test]
fn a_wait_activation_reaches_its_instance() {
    static DONE: OnceLock<Event> = OnceLock::new();
    let done = static_event(&DONE);
    let target = Event::auto_reset().unwrap();
    target.set().unwrap();
    let wait = Wait::new(target.into(), |act| {
        act.instance().set_event_on_return(DONE.get().unwrap()).unwrap();
    })
    .unwrap();
    wait.arm(Deadline::NEVER);
    assert!(signalled_within_patience(done), "an activation's instance did not set the event");
    wait.stop_and_drain();
}

#[test]
fn an_io_completion_reaches_its_instance() {
    static DONE: OnceLock<Event> = OnceLock::new();
    let done = static_event(&DONE);
    let path = std::env::temp_dir().join(format!("wtp-instance-io-{}", std::process::id()));
    std::fs::write(&path, b"instance").unwrap();
    let io = Io::new(
        windows_threadpool::io::open_file(&path, std::fs::OpenOptions::new().read(true)).unwrap(),
        |c: &IoCompletion| {
            c.instance().set_event_on_return(DONE.get().unwrap()).unwrap();
        },
    )
    .unwrap();
    io.read_at(0, vec![0u8; 8]).unwrap();
    assert!(signalled_within_patience(done), "a completion's instance did not set the event");
    drop(io);
    std::fs::remove_file(&path).unwrap();
}

/// A module nothing else in this process loads, so its only reference is
/// the test's.
const LONELY_DLL: &str = "msimg32.dll";

fn wide(s: &str) -> Vec<u16> {
    s.encode_utf16().chain([0]).collect()
}

fn is_loaded(name: &[u16]) -> bool {
    // SAFETY: `name` is NUL-terminated.
    !unsafe { GetModuleHandleW(name.as_ptr()) }.is_null()
}

#[test]
fn free_library_on_return_releases_the_callers_reference() {
    let name = wide(LONELY_DLL);
    assert!(!is_loaded(&name), "{LONELY_DLL} is already loaded; pick a module this process does not load");
    // SAFETY: `name` is NUL-terminated.
    let module = unsafe { LoadLibraryW(name.as_ptr()) };
    assert!(!module.is_null(), "LoadLibraryW({LONELY_DLL}) failed");
    assert!(is_loaded(&name));
    let module = module as usize;
    let (tx, rx) = mpsc::channel();
    let timer = Timer::new(move |f| {
        let inst = f.instance();
        // SAFETY: the test owns the one reference, gives it up here, and
        // never uses the module again.
        let first = unsafe { inst.free_library_on_return(module as *mut _) }.map_err(|e| e.kind());
        // SAFETY: refused before anything is released.
        let second = unsafe { inst.free_library_on_return(module as *mut _) }.map_err(|e| e.kind());
        tx.send((first, second)).unwrap();
    })
    .unwrap();
    timer.arm(Duration::ZERO);
    let (first, second) = rx.recv_timeout(PATIENCE).expect("the timer fired");
    assert_eq!(first, Ok(()));
    assert_eq!(second, Err(ErrorKind::AlreadyExists), "a second library for one callback must be refused");
    timer.stop_and_drain();
    // The release follows the callback's return; poll for it (the deadline
    // only decides the failure).
    let deadline = std::time::Instant::now() + PATIENCE;
    while is_loaded(&name) {
        assert!(std::time::Instant::now() < deadline, "{LONELY_DLL} stayed loaded: the pool did not release it");
        std::thread::sleep(Duration::from_millis(1));
    }
}
