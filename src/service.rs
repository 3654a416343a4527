//! Running a program as a Windows service, its work a future on the pool:
//! [`run`].
//!
//! ```no_run
//! fn main() -> std::io::Result<()> {
//!     windows_threadpool::service::run("my-service", |ctl: windows_threadpool::service::Control| async move {
//!         // ... serve ...
//!         ctl.stopping().await; // a stop from the SCM; Ctrl+C or a close on a console
//!         // ... finish in-flight work ...
//!         Ok(())
//!     })
//! }
//! ```
//!
//! # Under the service control manager
//! [`run`] hands the calling thread to the service control dispatcher
//! (`StartServiceCtrlDispatcherW`) until the service has stopped. The
//! dispatcher starts the service on a thread of its own, which registers
//! the control handler, reports `START_PENDING`, starts the future on the
//! pool and waits for it; the future reports `RUNNING` at its first poll.
//! A stop, a shutdown or a preshutdown makes [`Control::stopping`] resolve
//! and reports `STOP_PENDING`, its checkpoint rising every second (a pool
//! timer) with a wait hint of [`STOP_WAIT_HINT`], for as long as the
//! future takes to finish. Then `STOPPED` is reported with the outcome:
//! - `Ok(())`: exit code 0;
//! - `Err(e)`: `ERROR_SERVICE_SPECIFIC_ERROR` with `e`'s OS error code as
//!   the service-specific code (1 for an error without one), and `run`
//!   returns `Err(e)`;
//! - a panic: `ERROR_SERVICE_SPECIFIC_ERROR` with [`PANIC_EXIT_CODE`], and
//!   `run` resumes the panic on its thread once the dispatcher has
//!   returned, so it is not swallowed.
//!
//! The service must be an own-process service (`sc create NAME binPath=
//! ...`, type `own`, the default): the dispatcher is given one service,
//! under `name`, and a second `run` in one process fails.
//!
//! # From a console
//! Started from a console (or any way but by the SCM), the dispatcher
//! cannot connect (`ERROR_FAILED_SERVICE_CONTROLLER_CONNECT`) and the same
//! binary runs as a console program: the future runs on the pool, and
//! [`Control::stopping`] resolves on Ctrl+C, Ctrl+Break or the console's
//! close (for which the process is held until the future has finished;
//! see [`signal`](crate::signal)). One binary, debugged from a terminal,
//! as .NET's `UseWindowsService` hosts are. [`Control::under_scm`] tells the
//! two apart.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use std::ffi::OsStr;
use std::io;
use std::os::windows::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use windows_sys::Win32::Foundation::{
    ERROR_CALL_NOT_IMPLEMENTED, ERROR_FAILED_SERVICE_CONTROLLER_CONNECT, ERROR_SERVICE_SPECIFIC_ERROR, NO_ERROR,
};
use windows_sys::Win32::System::Services::{
    RegisterServiceCtrlHandlerExW, SERVICE_ACCEPT_PRESHUTDOWN, SERVICE_ACCEPT_SHUTDOWN, SERVICE_ACCEPT_STOP,
    SERVICE_CONTROL_INTERROGATE, SERVICE_CONTROL_PRESHUTDOWN, SERVICE_CONTROL_SHUTDOWN, SERVICE_CONTROL_STOP,
    SERVICE_RUNNING, SERVICE_START_PENDING, SERVICE_STATUS, SERVICE_STATUS_HANDLE, SERVICE_STOP_PENDING,
    SERVICE_STOPPED, SERVICE_TABLE_ENTRYW, SERVICE_WIN32_OWN_PROCESS, SetServiceStatus, StartServiceCtrlDispatcherW,
};
use windows_sys::core::PWSTR;

use crate::signal::{Listener, Signalled};
use crate::task::JoinHandle;

/// The wait hint reported with each `STOP_PENDING` (and `START_PENDING`):
/// how long the SCM is told to wait for the next checkpoint.
pub const STOP_WAIT_HINT: Duration = Duration::from_secs(5);

/// The service-specific exit code reported for a service whose future
/// panicked (101, the exit code of a Rust program that panics).
pub const PANIC_EXIT_CODE: u32 = 101;

/// What the service's future is given: whether it is to stop, and how it
/// was started. Cheap to clone; every clone sees the same stop.
#[derive(Clone, Debug)]
pub struct Control {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    under_scm: bool,
    stopping: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Control>();
};

impl Control {
    fn new(under_scm: bool) -> Self {
        Self {
            shared: Arc::new(Shared { under_scm, stopping: AtomicBool::new(false), wakers: Mutex::new(Vec::new()) }),
        }
    }

    /// Resolves once the service is to stop: a stop, shutdown or preshutdown
    /// from the SCM, or, on a console, Ctrl+C, Ctrl+Break or its close. At
    /// once if that has happened.
    pub fn stopping(&self) -> Stopping<'_> {
        Stopping { control: self }
    }

    /// Whether the service is to stop.
    pub fn is_stopping(&self) -> bool {
        self.shared.stopping.load(Ordering::SeqCst)
    }

    /// Whether the service control manager started the program (otherwise
    /// it runs as a console program; see [From a console](self#from-a-console)).
    pub fn under_scm(&self) -> bool {
        self.shared.under_scm
    }

    /// Marks the service stopping and wakes every [`Stopping`].
    fn stop(&self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        let wakers = core::mem::take(&mut *self.shared.wakers.lock().unwrap_or_else(PoisonError::into_inner));
        for w in wakers {
            w.wake();
        }
    }
}

/// The future of [`Control::stopping`].
#[must_use = "futures do nothing unless polled"]
#[derive(Debug)]
pub struct Stopping<'a> {
    control: &'a Control,
}

impl Future for Stopping<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.control.is_stopping() {
            return Poll::Ready(());
        }
        let mut wakers = self.control.shared.wakers.lock().unwrap_or_else(PoisonError::into_inner);
        // Checked again under the lock: `stop` sets the flag before it
        // takes the wakers, so a stop is either seen here or wakes this one.
        if self.control.is_stopping() {
            return Poll::Ready(());
        }
        if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

type Start = Box<dyn FnOnce(Control) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send>> + Send>;

/// What `run` hands the service's main function, and what it hands back.
struct Pending {
    name: Vec<u16>,
    start: Option<Start>,
    /// The future's outcome, a panic's payload as `Err`.
    outcome: Option<std::thread::Result<io::Result<()>>>,
}

fn pending() -> &'static Mutex<Option<Pending>> {
    static PENDING: Mutex<Option<Pending>> = Mutex::new(None);
    &PENDING
}

/// Runs `service` as the service `name`, or as a console program where no
/// service control manager started the process (see the [module
/// docs](self)). Returns once the future has finished: its error, if it
/// failed; its panic, resumed, if it panicked; the dispatcher's error if
/// it could not run at all. Call it once per process: a second call while
/// one runs is `AlreadyExists`, and one after it may fail as the
/// dispatcher does once started (`ERROR_SERVICE_ALREADY_RUNNING`).
pub fn run<F, Fut>(name: &str, service: F) -> io::Result<()>
where
    F: FnOnce(Control) -> Fut + Send + 'static,
    Fut: Future<Output = io::Result<()>> + Send + 'static,
{
    let mut wide: Vec<u16> = OsStr::new(name).encode_wide().collect();
    if wide.is_empty() || wide.contains(&0) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "a service name is not empty and holds no NUL"));
    }
    wide.push(0);
    let start: Start = Box::new(move |ctl| Box::pin(service(ctl)));
    {
        let mut slot = pending().lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_some() {
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, "a service already runs in this process"));
        }
        *slot = Some(Pending { name: wide.clone(), start: Some(start), outcome: None });
    }
    // Another `run` may start once this one has returned, or unwound.
    struct Vacate;
    impl Drop for Vacate {
        fn drop(&mut self) {
            *pending().lock().unwrap_or_else(PoisonError::into_inner) = None;
        }
    }
    let _vacate = Vacate;
    let table = [
        SERVICE_TABLE_ENTRYW { lpServiceName: wide.as_mut_ptr(), lpServiceProc: Some(service_main) },
        SERVICE_TABLE_ENTRYW { lpServiceName: core::ptr::null_mut(), lpServiceProc: None },
    ];
    // SAFETY: `table` ends with the null entry, and it and the name it
    // points to outlive the call, which returns once the service stopped.
    let dispatched = crate::sys::check(unsafe { StartServiceCtrlDispatcherW(table.as_ptr()) });
    let (start, outcome) = {
        let mut slot = pending().lock().unwrap_or_else(PoisonError::into_inner);
        let p = slot.as_mut().expect("run's own slot");
        (p.start.take(), p.outcome.take())
    };
    let outcome = match dispatched {
        Ok(()) => Ok(outcome),
        Err(e) if e.raw_os_error() == Some(ERROR_FAILED_SERVICE_CONTROLLER_CONNECT as i32) => {
            Ok(Some(console(start.expect("a console run starts the service here"))))
        }
        Err(e) => Err(e),
    };
    match outcome? {
        Some(Ok(result)) => result,
        Some(Err(panic)) => std::panic::resume_unwind(panic),
        None => Err(io::Error::other("the service control manager never started the service")),
    }
}

/// Runs the service as a console program: its future on the pool, stopped
/// by Ctrl+C, Ctrl+Break or the console's close.
fn console(start: Start) -> std::thread::Result<io::Result<()>> {
    let control = Control::new(false);
    // Marked stopping once the service has finished: ends the watcher.
    let finished = Control::new(false);
    let watcher = {
        let (control, finished) = (control.clone(), finished.clone());
        let listeners = [crate::signal::ctrl_c(), crate::signal::ctrl_break(), crate::signal::ctrl_close()];
        crate::task::try_spawn(async move {
            let held = first_of(listeners, finished.stopping()).await;
            control.stop();
            held // a close's `Signalled`, held until the service is done
        })
    };
    let outcome = match crate::task::try_spawn(async move { start(control).await }) {
        Ok(task) => task.join(),
        Err(e) => Ok(Err(e)),
    };
    finished.stop();
    if let Ok(watcher) = watcher {
        // The `Signalled` of a close, if one came, is dropped with its output.
        drop(watcher.join());
    }
    outcome
}

/// What the first of `listeners` to resolve resolved to, or `None` once
/// `finished` resolves first. A listener that failed (its handler could not
/// be registered) is left out.
async fn first_of<const N: usize>(listeners: [Listener; N], mut finished: Stopping<'_>) -> Option<Signalled> {
    let mut listeners = listeners.map(Some);
    core::future::poll_fn(move |cx| {
        for slot in &mut listeners {
            if let Some(l) = slot
                && let Poll::Ready(r) = Pin::new(l).poll(cx)
            {
                *slot = None;
                if let Ok(signalled) = r {
                    return Poll::Ready(Some(signalled));
                }
            }
        }
        Pin::new(&mut finished).poll(cx).map(|()| None)
    })
    .await
}

/// The service's status as reported, and the handle it is reported with.
struct Status {
    handle: SERVICE_STATUS_HANDLE,
    status: SERVICE_STATUS,
}

// SAFETY: the handle is a value the SCM gives to be passed back, usable
// from any thread (`SetServiceStatus` documents no thread affinity).
unsafe impl Send for Status {}

/// The one service of the process, while it runs under the SCM.
struct Running {
    control: Control,
    status: Mutex<Status>,
}

/// The run the control handler reaches: the latest one.
fn current() -> &'static Mutex<Option<&'static Running>> {
    static CURRENT: Mutex<Option<&'static Running>> = Mutex::new(None);
    &CURRENT
}

impl Running {
    /// Reports `state`; nothing once `STOPPED` has been reported. A
    /// pending state's checkpoint rises with each report.
    fn report(&self, state: u32, exit: Option<(u32, u32)>) {
        let mut s = self.status.lock().unwrap_or_else(PoisonError::into_inner);
        if s.status.dwCurrentState == SERVICE_STOPPED {
            return;
        }
        let pending = matches!(state, SERVICE_START_PENDING | SERVICE_STOP_PENDING);
        let same = s.status.dwCurrentState == state;
        s.status.dwCurrentState = state;
        s.status.dwCheckPoint = if !pending {
            0
        } else if same {
            s.status.dwCheckPoint + 1
        } else {
            1
        };
        s.status.dwWaitHint = if pending { STOP_WAIT_HINT.as_millis() as u32 } else { 0 };
        s.status.dwControlsAccepted = if state == SERVICE_RUNNING {
            SERVICE_ACCEPT_STOP | SERVICE_ACCEPT_SHUTDOWN | SERVICE_ACCEPT_PRESHUTDOWN
        } else {
            0
        };
        if let Some((win32, specific)) = exit {
            (s.status.dwWin32ExitCode, s.status.dwServiceSpecificExitCode) = (win32, specific);
        }
        // SAFETY: the handle came from RegisterServiceCtrlHandlerExW; the
        // status is a valid SERVICE_STATUS the call copies. A failure can
        // only be ignored: there is no one to report it to.
        unsafe { SetServiceStatus(s.handle, &s.status) };
    }

    /// A stop, shutdown or preshutdown: wakes the future, and reports
    /// `STOP_PENDING` every second until `STOPPED` is reported.
    fn stop(&'static self) {
        if self.control.is_stopping() {
            return;
        }
        self.control.stop();
        self.report(SERVICE_STOP_PENDING, None);
        // Without a task (the system refused one) the checkpoint stays at 1.
        drop(crate::task::try_spawn(async move {
            loop {
                crate::time::sleep(Duration::from_secs(1)).await;
                let state = self.status.lock().unwrap_or_else(PoisonError::into_inner).status.dwCurrentState;
                if state != SERVICE_STOP_PENDING {
                    return;
                }
                self.report(SERVICE_STOP_PENDING, None);
            }
        }));
    }
}

/// The control handler (`HandlerEx`), on the dispatcher's thread.
unsafe extern "system" fn control_handler(
    control: u32,
    _: u32,
    _: *mut core::ffi::c_void,
    _: *mut core::ffi::c_void,
) -> u32 {
    crate::callback::unwind::or_abort("the service control handler", || {
        let Some(running) = *current().lock().unwrap_or_else(PoisonError::into_inner) else {
            return ERROR_CALL_NOT_IMPLEMENTED;
        };
        match control {
            SERVICE_CONTROL_STOP | SERVICE_CONTROL_SHUTDOWN | SERVICE_CONTROL_PRESHUTDOWN => {
                running.stop();
                NO_ERROR
            }
            SERVICE_CONTROL_INTERROGATE => NO_ERROR,
            _ => ERROR_CALL_NOT_IMPLEMENTED,
        }
    })
}

/// The service's main function (`ServiceMain`), on a thread the dispatcher
/// starts: runs the future on the pool and reports its states.
unsafe extern "system" fn service_main(_: u32, _: *mut PWSTR) {
    crate::callback::unwind::or_abort("the service's main function", serve);
}

fn serve() {
    let (name, start) = {
        let mut slot = pending().lock().unwrap_or_else(PoisonError::into_inner);
        let p = slot.as_mut().expect("run set the service up");
        (p.name.clone(), p.start.take())
    };
    let Some(start) = start else { return }; // started twice: the first one serves
    // SAFETY: `name` is NUL-terminated; the handler is a plain function
    // that stays for the life of the process; no context is passed.
    let handle = unsafe { RegisterServiceCtrlHandlerExW(name.as_ptr(), Some(control_handler), core::ptr::null()) };
    let outcome = if handle.is_null() {
        Ok(Err(io::Error::last_os_error()))
    } else {
        let status = SERVICE_STATUS {
            dwServiceType: SERVICE_WIN32_OWN_PROCESS,
            dwCurrentState: 0, // none reported yet
            dwControlsAccepted: 0,
            dwWin32ExitCode: NO_ERROR,
            dwServiceSpecificExitCode: 0,
            dwCheckPoint: 0,
            dwWaitHint: 0,
        };
        // One per run, for the life of the process: the control handler and
        // the stop-pending task may outlive the run.
        let running: &'static Running =
            Box::leak(Box::new(Running { control: Control::new(true), status: Mutex::new(Status { handle, status }) }));
        *current().lock().unwrap_or_else(PoisonError::into_inner) = Some(running);
        running.report(SERVICE_START_PENDING, None);
        let control = running.control.clone();
        // The closure runs in the task too: its panic is the outcome's.
        let task: io::Result<JoinHandle<io::Result<()>>> = crate::task::try_spawn(async move {
            let future = start(control);
            running.report(SERVICE_RUNNING, None);
            future.await
        });
        let outcome = match task {
            Ok(task) => task.join(),
            Err(e) => Ok(Err(e)),
        };
        let codes = exit_codes(&outcome);
        // Stored before STOPPED is reported: the dispatcher may return, and
        // `run` read the slot, as soon as it is.
        if let Some(p) = pending().lock().unwrap_or_else(PoisonError::into_inner).as_mut() {
            p.outcome = Some(outcome);
        }
        running.report(SERVICE_STOPPED, Some(codes));
        return;
    };
    if let Some(p) = pending().lock().unwrap_or_else(PoisonError::into_inner).as_mut() {
        p.outcome = Some(outcome);
    }
}

/// The exit codes `STOPPED` is reported with for an outcome:
/// `(dwWin32ExitCode, dwServiceSpecificExitCode)`.
fn exit_codes(outcome: &std::thread::Result<io::Result<()>>) -> (u32, u32) {
    match outcome {
        Ok(Ok(())) => (NO_ERROR, 0),
        Ok(Err(e)) => (ERROR_SERVICE_SPECIFIC_ERROR, e.raw_os_error().map_or(1, |c| c as u32)),
        Err(_) => (ERROR_SERVICE_SPECIFIC_ERROR, PANIC_EXIT_CODE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outcome_becomes_its_exit_codes() {
        assert_eq!(exit_codes(&Ok(Ok(()))), (NO_ERROR, 0));
        assert_eq!(exit_codes(&Ok(Err(io::Error::from_raw_os_error(5)))), (ERROR_SERVICE_SPECIFIC_ERROR, 5));
        assert_eq!(exit_codes(&Ok(Err(io::Error::other("no code")))), (ERROR_SERVICE_SPECIFIC_ERROR, 1));
        assert_eq!(exit_codes(&Err(Box::new("boom"))), (ERROR_SERVICE_SPECIFIC_ERROR, PANIC_EXIT_CODE));
    }
}
