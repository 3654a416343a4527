//! The events `pool` records.

use crate::trace::events::EventInfo;

pub(crate) const EVENTS: &[EventInfo] = &[
    EventInfo { target: "pool", event: "created", slots: ["pool", ""], meaning: "a private pool was created" },
    EventInfo { target: "pool", event: "closed", slots: ["pool", ""], meaning: "a private pool was closed" },
    EventInfo {
        target: "pool",
        event: "prewarm-timeout",
        slots: ["", ""],
        meaning: "prewarm_default_pool gave up waiting and cancelled its work item",
    },
    EventInfo { target: "syscall", event: "CreateThreadpool", slots: ["", ""], meaning: "" },
    EventInfo { target: "syscall", event: "CloseThreadpool", slots: ["pool", ""], meaning: "" },
    EventInfo { target: "syscall", event: "SetThreadpoolThreadMaximum", slots: ["pool", "threads"], meaning: "" },
    EventInfo { target: "syscall", event: "SetThreadpoolThreadMinimum", slots: ["pool", "threads"], meaning: "" },
    EventInfo { target: "syscall", event: "SetThreadpoolStackInformation", slots: ["pool", "reserve"], meaning: "" },
    EventInfo { target: "syscall", event: "QueryThreadpoolStackInformation", slots: ["pool", ""], meaning: "" },
];
