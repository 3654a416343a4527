//! The events `work` records.

use crate::trace::events::EventInfo;

pub(crate) const EVENTS: &[EventInfo] = &[
    EventInfo { target: "work", event: "created", slots: ["work", "context"], meaning: "a work object was created" },
    EventInfo { target: "work", event: "submitted", slots: ["work", ""], meaning: "submit() queued one invocation" },
    EventInfo {
        target: "work",
        event: "trampoline-entered",
        slots: ["work", ""],
        meaning: "a pool thread entered the callback",
    },
    EventInfo { target: "work", event: "trampoline-left", slots: ["work", ""], meaning: "the callback returned" },
    EventInfo {
        target: "work",
        event: "drained",
        slots: ["work", "cancelled"],
        meaning: "every callback has run (cancelled=1: queued ones were discarded)",
    },
    EventInfo { target: "work", event: "drop-begin", slots: ["work", ""], meaning: "teardown started" },
    EventInfo {
        target: "work",
        event: "drain-owed",
        slots: ["work", ""],
        meaning: "teardown found submissions not yet dispatched or drained (call wait or stop_and_drain first)",
    },
    EventInfo {
        target: "work",
        event: "drop-drained",
        slots: ["work", ""],
        meaning: "teardown drained every callback",
    },
    EventInfo {
        target: "work",
        event: "drop-closed",
        slots: ["work", ""],
        meaning: "the work object was closed and its context freed",
    },
    EventInfo { target: "syscall", event: "CreateThreadpoolWork", slots: ["context", "environment"], meaning: "" },
    EventInfo { target: "syscall", event: "SubmitThreadpoolWork", slots: ["work", ""], meaning: "" },
    EventInfo { target: "syscall", event: "WaitForThreadpoolWorkCallbacks", slots: ["work", "cancel"], meaning: "" },
    EventInfo { target: "syscall", event: "CloseThreadpoolWork", slots: ["work", ""], meaning: "" },
];
