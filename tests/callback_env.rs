//! `CallbackEnviron` against the SDK's header definitions, written out here
//! independently of the implementation's constants.
#![cfg(windows)]

use windows_threadpool::{CallbackEnviron, CallbackPriority, ThreadpoolPool};

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
fn set_and_clear_pool() {
    let pool = ThreadpoolPool::new().unwrap();
    let mut env = CallbackEnviron::new();
    env.set_pool(&pool);
    assert_ne!(pool.as_raw(), 0);
    assert_eq!(env.as_inner().Pool, pool.as_raw());
    env.clear_pool();
    assert_eq!(env.as_inner().Pool, 0);
}

#[test]
fn priorities() {
    let mut env = CallbackEnviron::new();
    for (p, raw) in [(CallbackPriority::High, 0), (CallbackPriority::Low, 2), (CallbackPriority::Normal, 1)] {
        env.set_priority(p);
        assert_eq!(env.as_inner().CallbackPriority, raw, "{p:?}");
    }
    assert_eq!(CallbackPriority::default(), CallbackPriority::Normal);
}

#[test]
fn runs_long_sets_only_the_long_function_bit() {
    let mut env = CallbackEnviron::new();
    env.set_runs_long();
    // SAFETY: reading the u32 arm of a u32-sized union.
    assert_eq!(unsafe { env.as_inner().u.Flags }, 0b1);
    // SAFETY: the bit-field view of the same union.
    assert_eq!(unsafe { env.as_inner().u.s._bitfield }, 0b1);
    assert_eq!(env.as_inner().CallbackPriority, 1, "other fields untouched");
}

#[test]
fn library_and_cleanup_group_seams() {
    unsafe extern "system" fn cancel(_: *mut core::ffi::c_void, _: *mut core::ffi::c_void) {}
    let mut env = CallbackEnviron::new();
    let module = 0x1234usize as *mut core::ffi::c_void;
    // SAFETY: the environment is never used to create an object.
    unsafe {
        env.set_library(module);
        env.set_cleanup_group(0x5678, Some(cancel));
    }
    let e = env.as_inner();
    assert_eq!(e.RaceDll, module);
    assert_eq!(e.CleanupGroup, 0x5678);
    assert_eq!(e.CleanupGroupCancelCallback.map(|f| f as *const () as usize), Some(cancel as *const () as usize));
    let p = env.as_mut_ptr();
    assert_eq!(p as *const _, env.as_inner() as *const _);
}

/// What the `# Safety` contracts of `set_library` and `set_cleanup_group`
/// rest on: a clone made after the call carries the raw settings (so the
/// contract binds it), one made before does not.
#[test]
fn clones_made_after_a_raw_setting_carry_it() {
    unsafe extern "system" fn cancel(_: *mut core::ffi::c_void, _: *mut core::ffi::c_void) {}
    let mut env = CallbackEnviron::new();
    let before = env.clone();
    let module = 0x1234usize as *mut core::ffi::c_void;
    // SAFETY: no environment here is used to create an object.
    unsafe {
        env.set_library(module);
        env.set_cleanup_group(0x5678, Some(cancel));
    }
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
