//! The events `io` records.

use crate::trace::events::EventInfo;

pub(crate) const EVENTS: &[EventInfo] = &[
    EventInfo {
        target: "io",
        event: "created",
        slots: ["handle", "io"],
        meaning: "an I/O object was bound to a handle",
    },
    EventInfo {
        target: "io",
        event: "started",
        slots: ["overlapped", "generation"],
        meaning: "StartThreadpoolIo was called for an operation about to be issued",
    },
    EventInfo {
        target: "io",
        event: "start-cancelled",
        slots: ["overlapped", "error"],
        meaning: "the issuing call failed synchronously: the start was balanced with CancelThreadpoolIo and the payload returned",
    },
    EventInfo {
        target: "io",
        event: "trampoline-entered",
        slots: ["overlapped", "result"],
        meaning: "a pool thread entered the completion callback",
    },
    EventInfo {
        target: "io",
        event: "trampoline-left",
        slots: ["overlapped", "result"],
        meaning: "the callback returned and unclaimed storage was freed",
    },
    EventInfo {
        target: "io",
        event: "trampoline-foreign",
        slots: ["io", "result"],
        meaning: "a completion whose OVERLAPPED is not an outstanding operation of this object (null, or I/O issued on a duplicate of the handle) was ignored",
    },
    EventInfo {
        target: "io",
        event: "rundown-begin",
        slots: ["io", "outstanding"],
        meaning: "run_down started cancelling and waiting",
    },
    EventInfo {
        target: "io",
        event: "rundown-ended",
        slots: ["io", "outstanding"],
        meaning: "every completion was delivered and every callback returned",
    },
    EventInfo { target: "io", event: "drop-begin", slots: ["io", "outstanding"], meaning: "teardown started" },
    EventInfo {
        target: "io",
        event: "drain-owed",
        slots: ["io", "outstanding"],
        meaning: "teardown found operations whose completions were not yet delivered (they are cancelled)",
    },
    EventInfo {
        target: "io",
        event: "drop-drained",
        slots: ["io", ""],
        meaning: "teardown ran down and drained every callback",
    },
    EventInfo {
        target: "io",
        event: "drop-closed",
        slots: ["io", "handle"],
        meaning: "the I/O object was closed (its handle closed, or kept by a conversion) and the context freed",
    },
    EventInfo { target: "syscall", event: "CreateThreadpoolIo", slots: ["handle", "environment"], meaning: "" },
    EventInfo { target: "syscall", event: "StartThreadpoolIo", slots: ["io", ""], meaning: "" },
    EventInfo { target: "syscall", event: "CancelThreadpoolIo", slots: ["io", ""], meaning: "" },
    EventInfo { target: "syscall", event: "WaitForThreadpoolIoCallbacks", slots: ["io", "cancel"], meaning: "" },
    EventInfo { target: "syscall", event: "CloseThreadpoolIo", slots: ["io", ""], meaning: "" },
    EventInfo { target: "syscall", event: "closesocket", slots: ["socket", ""], meaning: "" },
    EventInfo { target: "syscall", event: "CancelIoEx", slots: ["handle", "overlapped"], meaning: "" },
    EventInfo { target: "syscall", event: "NtReadFile", slots: ["handle", "overlapped"], meaning: "" },
    EventInfo { target: "syscall", event: "NtWriteFile", slots: ["handle", "overlapped"], meaning: "" },
    EventInfo { target: "syscall", event: "NtFsControlFile", slots: ["handle", "overlapped"], meaning: "" },
    EventInfo { target: "syscall", event: "NtSetInformationFile", slots: ["handle", "class"], meaning: "" },
];
