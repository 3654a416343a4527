//! The events `heal` records.

use crate::trace::events::EventInfo;

pub(crate) const EVENTS: &[EventInfo] = &[
    EventInfo {
        target: "heal",
        event: "registered",
        slots: ["pool", "repair"],
        meaning: "a pool entered the registry (repair=1: its repair object exists)",
    },
    EventInfo { target: "heal", event: "retired", slots: ["pool", ""], meaning: "a pool's entry left the registry" },
    EventInfo {
        target: "heal",
        event: "cancel-stamped",
        slots: ["pool", "stamp"],
        meaning: "a cancellation marked the pool as owing a repair",
    },
    EventInfo {
        target: "heal",
        event: "cancel-untracked",
        slots: ["pool", ""],
        meaning: "a cancellation on a pool whose repair object cannot be created: nothing will repair it",
    },
    EventInfo { target: "heal", event: "healer-started", slots: ["", ""], meaning: "the healer's timer started" },
    EventInfo {
        target: "heal",
        event: "healer-unavailable",
        slots: ["pool", ""],
        meaning: "the healer could not start; the cancelling thread submitted the repair",
    },
    EventInfo {
        target: "heal",
        event: "repair-submitted",
        slots: ["pool", "unstarted"],
        meaning: "a repair work item was submitted to the pool",
    },
    EventInfo {
        target: "heal",
        event: "repair-started",
        slots: ["pool", "stamp"],
        meaning: "a repair began running: the pool dispatches again",
    },
    EventInfo {
        target: "heal",
        event: "repair-overdue",
        slots: ["pool", "episode"],
        meaning: "a repair stayed unstarted for 5 s; another is submitted",
    },
];
