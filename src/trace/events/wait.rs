//! The events `wait` records.

use crate::trace::events::EventInfo;

pub(crate) const EVENTS: &[EventInfo] = &[
    EventInfo { target: "wait", event: "created", slots: ["wait", "context"], meaning: "a wait object was created" },
    EventInfo {
        target: "wait",
        event: "armed",
        slots: ["wait", "handle"],
        meaning: "arm() set the wait on its handle",
    },
    EventInfo {
        target: "wait",
        event: "arm-suppressed",
        slots: ["wait", ""],
        meaning: "arm() raced stop_and_drain() and was absorbed by it",
    },
    EventInfo {
        target: "wait",
        event: "disarmed",
        slots: ["wait", ""],
        meaning: "disarm() took the wait off its handle",
    },
    EventInfo {
        target: "wait",
        event: "trampoline-entered",
        slots: ["wait", "timed_out"],
        meaning: "a pool thread entered the callback",
    },
    EventInfo { target: "wait", event: "trampoline-left", slots: ["wait", ""], meaning: "the callback returned" },
    EventInfo {
        target: "wait",
        event: "trampoline-flush",
        slots: ["wait", "timed_out"],
        meaning: "Wine only: an activation during a teardown flush, not passed to the callback",
    },
    EventInfo {
        target: "wait",
        event: "rearm-entered",
        slots: ["wait", "handle"],
        meaning: "a callback started re-arming its wait",
    },
    EventInfo { target: "wait", event: "rearm-left", slots: ["wait", ""], meaning: "the re-arm was published" },
    EventInfo {
        target: "wait",
        event: "rearm-suppressed",
        slots: ["wait", ""],
        meaning: "the re-arm was refused: the wait is being stopped or torn down",
    },
    EventInfo {
        target: "wait",
        event: "suppress-and-disarm",
        slots: ["wait", "flush"],
        meaning: "re-arms refused and the wait disarmed under one lock (flush=1: Wine flush needed)",
    },
    EventInfo {
        target: "wait",
        event: "drained",
        slots: ["wait", "cancelled"],
        meaning: "every callback has run (cancelled=1: queued ones were discarded)",
    },
    EventInfo {
        target: "wait",
        event: "flush-begin",
        slots: ["wait", ""],
        meaning: "Wine only: re-arming with a zero timeout to outlast stale handle arrays",
    },
    EventInfo {
        target: "wait",
        event: "flush-done",
        slots: ["wait", ""],
        meaning: "Wine only: the flush activation ran; nothing can queue a callback any more",
    },
    EventInfo {
        target: "wait",
        event: "stopped",
        slots: ["wait", ""],
        meaning: "stop_and_drain() brought the wait to rest",
    },
    EventInfo { target: "wait", event: "drop-begin", slots: ["wait", ""], meaning: "teardown started" },
    EventInfo {
        target: "wait",
        event: "drain-owed",
        slots: ["wait", ""],
        meaning: "teardown found an arming not yet dispatched or drained (call stop_and_drain first)",
    },
    EventInfo {
        target: "wait",
        event: "drop-drained",
        slots: ["wait", ""],
        meaning: "teardown drained every callback",
    },
    EventInfo {
        target: "wait",
        event: "drop-closed",
        slots: ["wait", ""],
        meaning: "the wait object and its handle were closed and the context freed",
    },
    EventInfo { target: "syscall", event: "CreateThreadpoolWait", slots: ["context", "environment"], meaning: "" },
    EventInfo { target: "syscall", event: "SetThreadpoolWait", slots: ["wait", "handle"], meaning: "" },
    EventInfo {
        target: "syscall",
        event: "SetThreadpoolWaitEx",
        slots: ["wait", ""],
        meaning: "a disarm (NULL handle) where the system has the call",
    },
    EventInfo { target: "syscall", event: "WaitForThreadpoolWaitCallbacks", slots: ["wait", "cancel"], meaning: "" },
    EventInfo { target: "syscall", event: "CloseThreadpoolWait", slots: ["wait", ""], meaning: "" },
    // A wait's target closing: recorded by `crate::handle`.
    EventInfo { target: "syscall", event: "CloseHandle", slots: ["handle", ""], meaning: "" },
    EventInfo {
        target: "syscall",
        event: "WaitCloseFn",
        slots: ["handle", ""],
        meaning: "a wait target's own close routine",
    },
];
