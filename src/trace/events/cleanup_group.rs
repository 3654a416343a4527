//! The events `cleanup_group` records.

use crate::trace::events::EventInfo;

pub(crate) const EVENTS: &[EventInfo] = &[
    EventInfo { target: "group", event: "created", slots: ["group", ""], meaning: "a cleanup group was created" },
    EventInfo {
        target: "group",
        event: "member-created",
        slots: ["group", "members"],
        meaning: "the group created a member; slot b is the number it now owns",
    },
    EventInfo {
        target: "group",
        event: "release-begin",
        slots: ["group", "members"],
        meaning: "close_members started releasing the members",
    },
    EventInfo {
        target: "group",
        event: "release-ended",
        slots: ["group", "members"],
        meaning: "the members were drained, closed and freed",
    },
    EventInfo { target: "group", event: "closed", slots: ["group", ""], meaning: "the group itself was closed" },
    EventInfo { target: "syscall", event: "CreateThreadpoolCleanupGroup", slots: ["", ""], meaning: "" },
    EventInfo {
        target: "syscall",
        event: "CloseThreadpoolCleanupGroupMembers",
        slots: ["group", "cancel"],
        meaning: "",
    },
    EventInfo { target: "syscall", event: "CloseThreadpoolCleanupGroup", slots: ["group", ""], meaning: "" },
];
