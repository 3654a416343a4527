//! `CallbackEnviron` against the SDK's header definitions, written out here
//! independently of the implementation's constants.
#![cfg(windows)]

use windows_threadpool::{CallbackEnviron, CallbackPriority, Pool};

#[test]
fn new_matches_initialize_threadpool_environment() {
    let env = CallbackEnviron::new();
    let e = env.as_inner();
    assert_eq!(e.Version, 3);
    assert_eq!(e.Pool, 0);
    assert_eq!(e.CleanupGroup, 0);
    assert!(e.CleanupGroupCancelCallback.is_none());
    assert!(e.RaceDll.is_null());
    assert_eq!(e.ActivationContext, 0);
    assert!(e.FinalizationCallback.is_none());
    // SAFETY: reading the u32 arm of a u32-sized union.
    assert_eq!(unsafe { e.u.Flags }, 0);
    assert_eq!(e.CallbackPriority, 1, "TP_CALLBACK_PRIORITY_NORMAL is 1");
    #[cfg(target_pointer_width = "64")]
    assert_eq!(e.Size, 72, "sizeof(TP_CALLBACK_ENVIRON_V3) on x64");
    let d = CallbackEnviron::default();
    assert_eq!(format!("{:?}", d), format!("{:?}", env));
    assert_eq!(d.as_inner().Size, e.Size);
}

#[test]
fn with_pool_sets_the_pool_and_keeps_it_open() {
    let pool = Pool::new().unwrap();
    let raw = pool.as_raw();
    assert_ne!(raw, 0);
    let env = CallbackEnviron::new().with_pool(&pool);
    assert_eq!(env.as_inner().Pool, raw);
    drop(pool);
    // The environment alone keeps the pool open: an object created from it
    // runs on it.
    let (tx, rx) = std::sync::mpsc::channel();
    let work = windows_threadpool::Work::new_in(move |_| tx.send(()).unwrap(), &env).unwrap();
    work.submit();
    rx.recv().unwrap();
    assert_eq!(CallbackEnviron::new().as_inner().Pool, 0);
}

#[test]
fn priorities() {
    for (p, raw) in [(CallbackPriority::High, 0), (CallbackPriority::Low, 2), (CallbackPriority::Normal, 1)] {
        let env = CallbackEnviron::new().with_priority(p);
        assert_eq!(env.as_inner().CallbackPriority, raw, "{p:?}");
        assert_eq!(env.priority(), p);
    }
    assert_eq!(CallbackPriority::default(), CallbackPriority::Normal);
    assert_eq!(CallbackEnviron::new().priority(), CallbackPriority::Normal);
}

#[test]
fn runs_long_sets_only_the_long_function_bit() {
    assert!(!CallbackEnviron::new().runs_long());
    let env = CallbackEnviron::new().with_runs_long();
    assert!(env.runs_long());
    // SAFETY: reading the u32 arm of a u32-sized union.
    assert_eq!(unsafe { env.as_inner().u.Flags }, 0b1);
    // SAFETY: the bit-field view of the same union.
    assert_eq!(unsafe { env.as_inner().u.s._bitfield }, 0b1);
    assert_eq!(env.as_inner().CallbackPriority, 1, "other fields untouched");
}

#[test]
fn library_and_cleanup_group_seams() {
    unsafe extern "system" fn cancel(_: *mut core::ffi::c_void, _: *mut core::ffi::c_void) {}
    let module = 0x1234usize as *mut core::ffi::c_void;
    // SAFETY: the environment is never used to create an object.
    let env = unsafe { CallbackEnviron::new().with_library(module).with_cleanup_group(0x5678, Some(cancel)) };
    let e = env.as_inner();
    assert_eq!(e.RaceDll, module);
    assert_eq!(e.CleanupGroup, 0x5678);
    assert_eq!(e.CleanupGroupCancelCallback.map(|f| f as *const () as usize), Some(cancel as *const () as usize));
    assert_eq!(env.as_ptr(), env.as_inner() as *const _);
}

/// What the `# Safety` contracts of `with_library` and `with_cleanup_group`
/// rest on: a clone made after the call carries the raw settings (so the
/// contract binds it), one made before does not.
#[test]
fn clones_made_after_a_raw_setting_carry_it() {
    unsafe extern "system" fn cancel(_: *mut core::ffi::c_void, _: *mut core::ffi::c_void) {}
    let env = CallbackEnviron::new();
    let before = env.clone();
    let module = 0x1234usize as *mut core::ffi::c_void;
    // SAFETY: no environment here is used to create an object.
    let env = unsafe { env.with_library(module).with_cleanup_group(0x5678, Some(cancel)) };
    let after = env.clone();
    let of_clone = after.clone();
    drop(env);
    for e in [after.as_inner(), of_clone.as_inner()] {
        assert_eq!(e.RaceDll, module);
        assert_eq!(e.CleanupGroup, 0x5678);
        assert!(e.CleanupGroupCancelCallback.is_some());
    }
    let b = before.as_inner();
    assert!(b.RaceDll.is_null() && b.CleanupGroup == 0 && b.CleanupGroupCancelCallback.is_none());
}
