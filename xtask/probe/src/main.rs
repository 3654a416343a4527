//! Probes run by `cargo xtask setup` to prove the Wine prefix: `hello` must
//! exit 0 with its output delivered; `null-write` and `abort` must exit
//! non-zero without a debugger intercepting them.

fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("hello") => println!("wine-probe: hello from a Windows process"),
        Some("null-write") => {
            let p = std::hint::black_box(std::ptr::null_mut::<u32>());
            // SAFETY: not safe, on purpose: the probe must crash with an access
            // violation so that setup can check the crash is reported as a failure.
            unsafe { p.write_volatile(1) };
            println!("wine-probe: survived a null write");
        }
        Some("abort") => std::process::abort(),
        other => {
            eprintln!("wine-probe: unknown mode {other:?}; expected hello, null-write or abort");
            std::process::exit(2);
        }
    }
}
