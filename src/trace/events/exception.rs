//! The events the trace records itself.

use crate::trace::events::EventInfo;

pub(crate) const EVENTS: &[EventInfo] = &[EventInfo {
    target: "exception",
    event: "raised",
    slots: ["code", "address"],
    meaning: "a first-chance exception was raised on this thread; the observer recorded it and declined to handle it",
}];
