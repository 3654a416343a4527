//! Socket helpers the network tests share.
#![allow(dead_code)]

use std::os::windows::io::AsRawSocket;

/// Sets `SO_LINGER` to 0 on `s`, so that closing it resets the connection.
pub fn reset_on_close(s: &impl AsRawSocket) {
    use windows_sys::Win32::Networking::WinSock::{LINGER, SO_LINGER, SOL_SOCKET, setsockopt};
    let linger = LINGER { l_onoff: 1, l_linger: 0 };
    // SAFETY: `s` is an open socket; `linger` is a LINGER of the size passed.
    let r = unsafe {
        setsockopt(
            s.as_raw_socket() as usize,
            SOL_SOCKET,
            SO_LINGER,
            (&raw const linger).cast(),
            size_of::<LINGER>() as i32,
        )
    };
    assert_eq!(r, 0, "setsockopt(SO_LINGER): {}", std::io::Error::last_os_error());
}
